"""A sweep file for ``ragsweep check``: the file itself, then every value of every axis
composed on top of the sweep's baseline and validated as the sweeper would, all problems
reported (file:line of the axis)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from ragsweep.check.compose import COMPOSE_ERRORS, Composer, override_key, task_config
from ragsweep.check.problems import Problem, first_line, located
from ragsweep.config.app import sweep_dirs
from ragsweep.config.schema import ChunkingConfig
from ragsweep.core.errors import RagsweepError
from ragsweep.run.config import resolve
from ragsweep.run.describe import CHUNKING, chunking_fields
from ragsweep.sweep.spec import (
    Axis,
    Point,
    SweepFileError,
    SweepSpec,
    load_sweep,
    resolve_sweep_path,
)

EVAL_OBJECTIVE = "eval.objective"


@dataclass(frozen=True)
class SweepCheck:
    """A checked sweep: its spec (None if the file is invalid), the chunking of each
    valid value on the baseline (label → config) and the problems found."""

    spec: SweepSpec | None
    chunkings: tuple[tuple[str, ChunkingConfig], ...] = ()
    problems: tuple[Problem, ...] = ()
    values: int = 0


def job_lines(spec: SweepSpec, overrides: Sequence[str]) -> dict[str, str]:
    """The baseline of the sweep file, then the command line (which wins), by key."""
    lines = {key: f"{key}={text}" for key, text in spec.baseline}
    lines.update({override_key(line): line for line in overrides})
    lines[EVAL_OBJECTIVE] = f"{EVAL_OBJECTIVE}={spec.objective}"
    return lines


def check_sweep(
    composer: Composer, name: str, overrides: Sequence[str], sweeps_dir: Path
) -> SweepCheck:
    """Load the sweep ``name`` and validate every axis value on its baseline."""
    try:
        spec = load_sweep(resolve_sweep_path(name, sweep_dirs(sweeps_dir)))
    except SweepFileError as exc:
        return SweepCheck(None, problems=(Problem("", str(exc)),))
    lines = job_lines(spec, overrides)
    try:
        baseline = composer.compose(list(lines.values()))
    except COMPOSE_ERRORS as exc:
        problem = Problem(str(spec.path), f"the baseline config is invalid: {first_line(exc)}")
        return SweepCheck(spec, problems=(problem,))
    chunkings: dict[ChunkingConfig, None] = {}  # distinct, in axis order
    problems: list[Problem] = []
    values = 0
    for number, axis in enumerate(spec.axes, start=1):
        for point in axis.points():
            values += 1
            outcome = _point(composer, baseline, lines, point)
            if isinstance(outcome, str):
                where = located(spec.path, axis.keys[0])
                problems.append(Problem(where, f"{_label(number, axis, point)}: {outcome}"))
            else:
                chunkings.setdefault(outcome)
    labelled = tuple((chunking_label(c), c) for c in chunkings)
    return SweepCheck(spec, labelled, tuple(problems), values)


def _label(number: int, axis: Axis, point: Point) -> str:
    return f"axis {number} ({axis.label}) value {point.label}"


def _point(
    composer: Composer, baseline: DictConfig, lines: dict[str, str], point: Point
) -> ChunkingConfig | str:
    """The chunking of ``point`` on the baseline, or why its job config is invalid."""
    for line in point.lines.values():
        problem = composer.override_problem(baseline, line)
        if problem is not None:
            return problem.message
    try:
        cfg = composer.compose(list({**lines, **point.lines}.values()))
        return resolve(task_config(cfg)).cfg.chunking
    except COMPOSE_ERRORS as exc:
        return first_line(exc)
    except RagsweepError as exc:
        return str(exc)


def chunking_label(cfg: ChunkingConfig) -> str:
    """``fixed size=800 overlap=100`` (``+heading_prefix`` when set)."""
    prefix = " +heading_prefix" if cfg.heading_prefix else ""
    return CHUNKING.format_map(chunking_fields(cfg)) + prefix
