"""What one sweep has learned while it runs: the configurations evaluated (and how), those
that failed, the axes decided so far, a search's trials, and the best configuration to build
the next axis on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragsweep.sweep.compose import Composed
from ragsweep.sweep.paired import CaseValues, Unpaired
from ragsweep.sweep.result import AxisResult, SearchResult, SkippedAxis, Status
from ragsweep.sweep.spec import Axis, Point


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
    configs: dict[str, Composed] = field(default_factory=dict)
    """Every valid configuration composed so far, by config hash (its values per axis)."""
    search: SearchResult | None = None
    """The search so far (``strategy: optuna``): its trials, then its decision."""

    def seen(self, config_hash: str | None) -> bool:
        """True once the configuration has run in this sweep (or before a resume)."""
        return config_hash in self.evaluated or config_hash in self.failed

    def remember(self, composed: Composed) -> Composed:
        """Keep a valid composed configuration (:attr:`configs`); return it."""
        if composed.config_hash is not None and composed.resolved is not None:
            self.configs.setdefault(composed.config_hash, composed)
        return composed

    def labels_of(self, config_hash: str, axes: Sequence[Axis]) -> tuple[str | None, ...] | None:
        """A composed configuration's value label of each axis (None for an axis whose keys
        it lacks); None when it was not composed in this sweep."""
        composed = self.configs.get(config_hash)
        if composed is None:
            return None
        return tuple(
            composed.point_of(axis).label
            if all(composed.has_key(key) for key in axis.keys)
            else None
            for axis in axes
        )

    def values_of(self, config_hash: str, axes: Sequence[Axis]) -> dict[str, str] | None:
        """:meth:`labels_of` as axis label → value label, axes it lacks left out."""
        labels = self.labels_of(config_hash, axes)
        if labels is None:
            return None
        return {a.label: v for a, v in zip(axes, labels, strict=True) if v is not None}


def trial_status(known: Evaluation, config_hash: str, launched: set[str]) -> Status:
    """How a configuration with a known objective got it for a decision or trial: ``new``
    if it was ``launched`` for it, ``resumed`` if logged before a resume, else ``reused``."""
    if config_hash in launched:
        return "new"
    return "resumed" if known.status == "resumed" else "reused"
