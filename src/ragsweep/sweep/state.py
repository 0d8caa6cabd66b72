"""What one sweep has learned while it runs: the configurations evaluated (and how), those
that failed, the axes decided so far, and the best configuration to build the next axis on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ragsweep.sweep.compose import Composed
from ragsweep.sweep.paired import CaseValues, Unpaired
from ragsweep.sweep.result import AxisResult, SkippedAxis, Status
from ragsweep.sweep.spec import Point


@dataclass(frozen=True)
class Evaluation:
    """A configuration with a known objective; ``status`` says where it came from;
    ``run_dir``: the job's output directory (None for a run logged before a resume);
    ``acl_leaks``: its logged ``acl_leaks`` metric (None: not logged), used when its
    per-case results cannot be read."""

    objective: float
    run_id: str | None
    n: int | None
    status: Status
    run_dir: Path | None = None
    acl_leaks: float | None = None


@dataclass(frozen=True)
class Current:
    """The best configuration so far: its overrides (key → line) and its composition."""

    overrides: dict[str, str]
    composed: Composed

    def with_point(self, point: Point) -> dict[str, str]:
        return {**self.overrides, **point.lines}


@dataclass
class SweepState:
    """What one sweep has learned so far, by config hash; ``next_job``: the index of the
    next job launched."""

    evaluated: dict[str, Evaluation] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    axes: list[AxisResult] = field(default_factory=list)
    skipped: list[SkippedAxis] = field(default_factory=list)
    next_job: int = 0
    cases: dict[str, CaseValues | Unpaired] = field(default_factory=dict)
    pass_number: int = 1
    """The pass over the axes under way (:mod:`ragsweep.sweep.strategy`)."""
    stopped: str = ""
    """Why the sweep made no further pass (empty until it ends)."""

    def seen(self, config_hash: str | None) -> bool:
        """True once the configuration has run in this sweep (or before a resume)."""
        return config_hash in self.evaluated or config_hash in self.failed
