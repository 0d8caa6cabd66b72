"""Launching a sweep's jobs: the overrides that attach each job's run to the parent, the
launch of an axis' new configurations in batches through Hydra's launcher, the collection
of what each job returned into the sweep's state, and the record of a failed job (printed,
and logged as a FAILED child run when tracking is on).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from rich.console import Console

from ragsweep.core import tags as tag
from ragsweep.core.terminal import say
from ragsweep.run.names import sweep_child_name
from ragsweep.run.record import run_params
from ragsweep.sweep.compose import Composed
from ragsweep.sweep.runs import SweepRuns, child_tags
from ragsweep.sweep.spec import Axis, Point, SweepSpec, override_text
from ragsweep.sweep.state import Evaluation, SweepState
from ragsweep.tracking.background import drain_active

RUN_NAME_KEY = "tracking.run_name"


@dataclass(frozen=True)
class AxisJobs:
    """One axis' configurations as launched: ``points[i]`` composed as ``composed[i]``;
    ``title``: the launching line's words before ``: launching`` (default: the axis, its
    number and how many of its configurations are launched)."""

    number: int
    axis: Axis
    points: Sequence[Point]
    composed: Sequence[Composed]
    title: str = ""


class JobLauncher:
    """Launches the jobs of one sweep and records their outcome in ``state``; ``runs``: the
    sweep's parent run (None when tracking is off); ``fixed``: the sweep's fixed overrides
    by key; ``max_batch_size``: at most this many jobs per launcher call."""

    def __init__(
        self,
        launcher: Launcher,
        spec: SweepSpec,
        state: SweepState,
        runs: SweepRuns | None,
        console: Console,
        sweep_dir: Path,
        fixed: Mapping[str, str],
        max_batch_size: int | None,
    ) -> None:
        self.launcher = launcher
        self.spec = spec
        self.state = state
        self.runs = runs
        self.console = console
        self.sweep_dir = sweep_dir
        self.fixed = fixed
        self.max_batch_size = max_batch_size

    @property
    def _swept_keys(self) -> list[str]:
        """Every key the sweep's axes set (names shorten each to what tells it apart)."""
        return [key for axis in self.spec.axes for key in axis.keys]

    def tracking_lines(
        self, number: int, axis: Axis, point: Point, extra: Mapping[str, str] | None = None
    ) -> list[str]:
        """Overrides that attach a job's run to the parent and tag its axis and value (and
        the ``extra`` tags)."""
        if self.runs is None:
            return []
        tags = {
            **child_tags(self.spec, number, axis.label, point.label),
            **self.runs.inputs,
            **(extra or {}),
        }
        pairs = ", ".join(f"{key}: {override_text(str(value))}" for key, value in tags.items())
        lines = [f"tracking.parent_run_id={self.runs.parent_id}", f"++tracking.tags={{{pairs}}}"]
        if RUN_NAME_KEY not in self.fixed:  # the user's tracking.run_name wins
            name = sweep_child_name(point.assignments, self.runs.parent_id, self._swept_keys)
            lines.append(f"{RUN_NAME_KEY}={override_text(name)}")
        return lines

    def launch_new(self, jobs: AxisJobs) -> set[str]:
        """Launch the valid configurations not evaluated yet (each config once); return
        their config hashes."""
        todo: dict[str, int] = {}
        for index, c in enumerate(jobs.composed):
            if c.config_hash is not None and not self.state.seen(c.config_hash):
                todo.setdefault(c.config_hash, index)
        _say_launching(self.console, self.spec, jobs, len(todo))
        launched_ms = time.time_ns() // 1_000_000
        returns = self._launch([list(jobs.composed[i].lines) for i in todo.values()])
        drain_active()  # the jobs' runs are all in the store before it is read
        self._collect(jobs, list(todo.values()), returns, launched_ms)
        return set(todo)

    def _launch(self, jobs: list[list[str]]) -> list[JobReturn]:
        returns: list[JobReturn] = []
        for batch in _batches(jobs, self.max_batch_size):
            returns.extend(self.launcher.launch(batch, initial_job_idx=self.state.next_job))
            self.state.next_job += len(batch)
        return returns

    def _collect(
        self, jobs: AxisJobs, indexes: list[int], returns: list[JobReturn], launched_ms: int
    ) -> None:
        """Record each launched job's objective (with its logged child run) or failure;
        ``indexes``: the launched configurations' positions in ``jobs``."""
        new = self.runs.logged_children(self.spec.objective) if self.runs and indexes else {}
        for index, ret in zip(indexes, returns, strict=True):
            c = jobs.composed[index]
            assert c.config_hash is not None
            objective, error = _outcome(ret)
            if objective is None:
                self.state.failed[c.config_hash] = error
                self._record_failure(jobs, index, ret, error, launched_ms)
                continue
            child = new.get(c.config_hash)
            self.state.evaluated[c.config_hash] = Evaluation(
                objective,
                child.run_id if child else None,
                child.n if child else None,
                "new",
                _job_dir(ret),
                child.acl_leaks if child else None,
            )

    def _record_failure(
        self, jobs: AxisJobs, index: int, ret: JobReturn, error: str, launched_ms: int
    ) -> None:
        """Print the failure of ``jobs``' configuration ``index`` and log it as a FAILED
        child run (when tracking is on); ``launched_ms``: when the job's batch was launched
        (ms since the epoch)."""
        point, composed = jobs.points[index], jobs.composed[index]
        _say_failure(self.console, jobs.axis, point, error)
        if self.runs is None or composed.resolved is None:
            return
        job_dir = _job_dir(ret) or self.sweep_dir / f"failed-{(composed.config_hash or 'job')[:12]}"
        self.runs.record_failure(
            run_name="FAILED "
            + sweep_child_name(point.assignments, self.runs.parent_id, self._swept_keys),
            params=run_params(composed.resolved),
            tags={
                **child_tags(self.spec, jobs.number, jobs.axis.label, point.label),
                tag.CONFIG_HASH: composed.config_hash or "",
            },
            error=error,
            artifacts_dir=job_dir,
            launched_ms=launched_ms,
        )


def _say_launching(console: Console, spec: SweepSpec, jobs: AxisJobs, count: int) -> None:
    if jobs.title:
        say(console, f"{jobs.title}: launching")
        return
    say(
        console,
        f"axis {jobs.number}/{len(spec.axes)} {jobs.axis.label}: launching {count} of "
        f"{len(jobs.points)} configuration(s)",
    )


def _say_failure(console: Console, axis: Axis, point: Point, error: str) -> None:
    say(console, f"failed {axis.label}={point.label}: {error}", "  ", style="red")


def _job_dir(ret: JobReturn) -> Path | None:
    """The job's output directory (where its run wrote ``cases.jsonl``), if known."""
    if ret.hydra_cfg is None:
        return None
    return Path(str(ret.hydra_cfg.hydra.runtime.output_dir))


def _batches(jobs: list[list[str]], size: int | None) -> Iterator[list[list[str]]]:
    step = size if size and size > 0 else max(len(jobs), 1)
    for begin in range(0, len(jobs), step):
        yield jobs[begin : begin + step]


def _outcome(ret: JobReturn) -> tuple[float | None, str]:
    """The job's objective and ``""``, or None and the error that stopped it."""
    if ret.status != JobStatus.COMPLETED:
        exc = ret._return_value
        return None, f"{type(exc).__name__}: {exc}"
    value = ret.return_value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, f"the task returned {value!r}, not a finite objective"
    return float(value), ""
