"""A sweep file for ``ragsweep check``: the file itself, then the sweeper's own pre-launch
validation (:func:`ragsweep.sweep.checks.preflight`: the baseline, every axis key and group
option, every value composed as the launcher will compose it, the one-factor check), every
problem reported once, blamed on the file and line it is in or on the command line. A value
whose config does not validate, which the sweeper would show as invalid, is a problem too."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from ragsweep.check.compose import COMMAND_LINE, Composer
from ragsweep.check.problems import Problem
from ragsweep.config.app import sweep_dirs
from ragsweep.config.schema import ChunkingConfig, from_mapping
from ragsweep.core.errors import ConfigError
from ragsweep.run.describe import CHUNKING, chunking_fields
from ragsweep.sweep.checks import Preflight, SweepProblem, axis_where, preflight
from ragsweep.sweep.compose import Composer as SweepComposer
from ragsweep.sweep.reuse import ReusingLoader
from ragsweep.sweep.spec import SweepFileError, SweepSpec, load_sweep, resolve_sweep_path


@dataclass(frozen=True)
class SweepCheck:
    """A checked sweep: its spec (None if the file is invalid), the chunking of each
    valid value (label → config) and the problems found."""

    spec: SweepSpec | None
    chunkings: tuple[tuple[str, ChunkingConfig], ...] = ()
    problems: tuple[Problem, ...] = ()
    values: int = 0


def check_sweep(composer: Composer, cfg: DictConfig, name: str, sweeps_dir: Path) -> SweepCheck:
    """Load the sweep ``name`` and run the sweeper's checks on ``cfg``, the config the
    command line composes (``hydra`` node included: its task overrides are the sweep's)."""
    try:
        spec = load_sweep(resolve_sweep_path(name, sweep_dirs(sweeps_dir)))
    except SweepFileError as exc:
        return SweepCheck(None, problems=(Problem("", str(exc)),))
    arguments = [str(line) for line in cfg.hydra.overrides.task]
    try:
        sweep_composer = SweepComposer(ReusingLoader(composer.loader), cfg, spec, arguments)
    except ConfigError as exc:
        return SweepCheck(spec, problems=(Problem(COMMAND_LINE, str(exc)),))
    checked = preflight(sweep_composer)
    found = sorted([*checked.problems, *_invalid_values(spec, checked)], key=lambda p: p.axis)
    problems = [Problem(p.where, p.message) for p in found]
    return SweepCheck(
        spec,
        tuple((chunking_label(c), c) for c in _chunkings(checked)),
        tuple(problems),
        sum(len(values) for values in checked.values.values()),
    )


def _invalid_values(spec: SweepSpec, checked: Preflight) -> list[SweepProblem]:
    """A problem per axis value whose job config does not validate."""
    problems = []
    for number, values in checked.values.items():
        axis = spec.axes[number - 1]
        for point, composed in values:
            if composed.error is not None:
                label = f"axis {number} ({axis.label}) value {point.label}"
                where = axis_where(spec, number, axis)
                problems.append(SweepProblem(where, f"{label}: {composed.error}", number))
    return problems


def _chunkings(checked: Preflight) -> list[ChunkingConfig]:
    """The distinct chunkings of the valid axis values, in axis order."""
    found: dict[ChunkingConfig, None] = {}
    for values in checked.values.values():
        for _, composed in values:
            if composed.resolved is not None:
                found.setdefault(
                    from_mapping(ChunkingConfig, composed.resolved["chunking"], "chunking")
                )
    return list(found)


def chunking_label(cfg: ChunkingConfig) -> str:
    """``fixed size=800 overlap=100`` (``+heading_prefix`` when set)."""
    prefix = " +heading_prefix" if cfg.heading_prefix else ""
    return CHUNKING.format_map(chunking_fields(cfg)) + prefix
