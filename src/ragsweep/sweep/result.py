"""What a sweep found: per axis the trials and the chosen value, the trials of a search
(``strategy: optuna``) and its decision, and the final config.

``sweep_result.yaml`` (written next to the job folders and logged on the parent run) is
:meth:`SweepResult.to_dict` as YAML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from ragsweep.core.atomic import write_text_atomic
from ragsweep.sweep.factors import Factors
from ragsweep.sweep.paired import Paired
from ragsweep.sweep.spec import Axis, Point, SweepSpec

# new: launched now and succeeded; reused: same config evaluated earlier in this sweep;
# resumed: logged under the same parent run by an interrupted earlier attempt;
# failed: the job raised; invalid: the config does not validate, so it was not launched.
Status = Literal["new", "reused", "resumed", "failed", "invalid"]
STATUSES: tuple[Status, ...] = ("new", "reused", "resumed", "failed", "invalid")

RESULT_FILE = "sweep_result.yaml"
"""The sweep's result in its folder (and on the parent run)."""


@dataclass(frozen=True)
class Trial:
    """One value of an axis and its outcome. ``n`` is the number of scored questions;
    ``paired`` compares it with the axis' chosen value on the same cases (None for the
    chosen value itself and for values without an objective)."""

    point: Point
    status: Status
    objective: float | None = None
    config_hash: str | None = None
    run_id: str | None = None
    n: int | None = None
    error: str | None = None
    incumbent: bool = False
    paired: Paired | None = None
    leaks: float | None = None
    """Its ``acl_leaks`` over every case (None: unknown, or a corpus without access
    metadata); a sweep never adopts a leak."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.point.label,
            "overrides": [f"{k}={v}" for k, v in self.point.assignments],
            "status": self.status,
            "objective": self.objective,
            "n": self.n,
            "config_hash": self.config_hash,
            "run_id": self.run_id,
            "error": self.error,
            "incumbent": self.incumbent,
            "vs_chosen": None if self.paired is None else self.paired.to_dict(),
            **({"acl_leaks": self.leaks} if self.leaks is not None else {}),
        }


@dataclass(frozen=True)
class AxisResult:
    """The trials of one axis (file order; an incumbent outside the list comes first).

    ``chosen``, ``reference`` (the value to beat) and ``runner_up`` (the best other
    configuration) index ``trials``; ``chosen`` is None when no value of the axis had an
    objective. ``distinguishable``: whether the paired test of the runner-up against the
    chosen value rejected at the sweep's alpha (None: no runner-up or no paired values).
    ``other_factors``: result-affecting values besides its own that the axis changed
    (only for an axis with ``allow_multi_factor``; see :mod:`ragsweep.sweep.factors`).
    """

    axis: Axis
    trials: tuple[Trial, ...]
    chosen: int | None
    reference: int | None = None
    runner_up: int | None = None
    distinguishable: bool | None = None
    other_factors: Factors = field(default_factory=dict)
    number: int = 0
    """The axis' position in the sweep file, from 1 (0: not known)."""
    pass_number: int = 1
    """The pass over the axes it was decided in (:mod:`ragsweep.sweep.strategy`)."""

    @property
    def best(self) -> Trial | None:
        return None if self.chosen is None else self.trials[self.chosen]

    @property
    def again(self) -> str:
        """`` (pass k)`` for an axis decided in a later pass (k > 1), else empty: what
        tables and notes add to its number."""
        return f" (pass {self.pass_number})" if self.pass_number > 1 else ""

    def label(self, index: int | None) -> str | None:
        """The value label of trial ``index`` (None for None)."""
        return None if index is None else self.trials[index].point.label

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "number": self.number,
            "pass": self.pass_number,
            "axis": self.axis.label,
            "chosen": self.label(self.chosen),
            "objective": None if best is None else best.objective,
            "reference": self.label(self.reference),
            "runner_up": self.label(self.runner_up),
            "distinguishable": self.distinguishable,
            "allow_multi_factor": self.axis.allow_multi_factor,
            "other_factors": self.other_factors,
            "trials": [t.to_dict() for t in self.trials],
        }


@dataclass(frozen=True)
class SearchAxis(Axis):
    """The decision after a search (:mod:`ragsweep.sweep.search`), shown and recorded as one
    more axis over every key of the sweep: its values are the passes' winner (the value to
    beat) and the search's best, each a point over every key."""

    name: str = "search"

    @property
    def label(self) -> str:
        return self.name


@dataclass(frozen=True)
class SearchPoint(Point):
    """A configuration of the search's decision: its assignments of every key, shown by
    its value of each axis (``heading, nfkc, 400``; the terminal's table shows one a line)."""

    values: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return ", ".join(self.values)


@dataclass(frozen=True)
class SearchTrial:
    """One trial of a search: its number (from 1), its value of each axis (axis label →
    value label), and its outcome (``status`` as for an axis' trials: ``new`` launched for
    this trial, ``reused``/``resumed`` evaluated before, ``failed``, ``invalid``)."""

    number: int
    values: tuple[tuple[str, str], ...]
    status: Status
    objective: float | None = None
    config_hash: str | None = None
    run_id: str | None = None
    error: str | None = None
    leaked: bool = False

    @property
    def label(self) -> str:
        """``paragraph, nfkc, 400, 0``: its values in axis order."""
        return ", ".join(value for _, value in self.values)

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial": self.number,
            "point": dict(self.values),
            "status": self.status,
            "objective": self.objective,
            "config_hash": self.config_hash,
            "run_id": self.run_id,
            "error": self.error,
            **({"leaked": True} if self.leaked else {}),
        }


@dataclass(frozen=True)
class SearchResult:
    """A search's trials (in the order asked), the configurations of the passes told to its
    sampler before the first trial (``told``), the index of its best trial (None: no trial
    had a clean objective), and what was decided: ``adopted`` (the search's best replaced
    the passes' winner; None: not decided, the sweep stopped before) and ``why``, in
    words."""

    sampler: str
    trials: tuple[SearchTrial, ...]
    told: int = 0
    best: int | None = None
    adopted: bool | None = None
    why: str = ""

    @property
    def best_trial(self) -> SearchTrial | None:
        return None if self.best is None else self.trials[self.best]

    def count(self, status: Status) -> int:
        return sum(t.status == status for t in self.trials)

    def to_dict(self) -> dict[str, Any]:
        best = self.best_trial
        return {
            "sampler": self.sampler,
            "told": self.told,
            "best_trial": None if best is None else best.number,
            "outcome": None if self.adopted is None else ("adopted" if self.adopted else "kept"),
            "why": self.why,
            "trials": [t.to_dict() for t in self.trials],
        }


@dataclass(frozen=True)
class SkippedAxis:
    """An axis not swept because the configuration chosen before it lacks its keys."""

    number: int
    axis: Axis
    missing: tuple[str, ...]

    @property
    def reason(self) -> str:
        return f"the configuration chosen so far has no {', '.join(self.missing)}"

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "axis": self.axis.label, "reason": self.reason}


@dataclass(frozen=True)
class FinalConfig:
    """The configuration the sweep ends with, and how to reproduce it."""

    overrides: tuple[str, ...]
    objective: float
    config_hash: str
    run_id: str | None
    config: dict[str, Any]
    run_dir: Path | None = None
    """The folder of the job that evaluated it (None: not known, e.g. resumed)."""


@dataclass(frozen=True)
class SweepResult:
    """A finished (or aborted: ``final`` is None) sweep."""

    spec: SweepSpec
    axes: tuple[AxisResult, ...]
    final: FinalConfig | None
    parent_run_id: str | None
    sweep_dir: Path
    skipped: tuple[SkippedAxis, ...] = ()
    passes: int = 1
    """The passes over the axes made (:mod:`ragsweep.sweep.strategy`)."""
    stopped: str = ""
    """Why no further pass was made."""
    evaluated: tuple[dict[str, Any], ...] = ()
    """Every configuration with an objective: ``config_hash``, ``objective``, ``run_id``
    and its ``point`` (axis label → value)."""
    search: SearchResult | None = None
    """The search after the passes (``strategy: optuna``; its decision is the last of
    ``axes``), None for a strategy without one or a sweep stopped before it."""

    @property
    def trail(self) -> list[dict[str, Any]]:
        """The objective of the best configuration so far, after each axis."""
        return [
            {"axis": a.axis.label, "chosen": best.point.label, "objective": best.objective}
            for a in self.axes
            if (best := a.best) is not None
        ]

    def count(self, status: Status) -> int:
        """The axes' trials with ``status``, and the search's (its decision launches
        nothing: the configurations it compares are counted where they ran)."""
        searched = 0 if self.search is None else self.search.count(status)
        return searched + sum(
            t.status == status
            for a in self.axes
            if not isinstance(a.axis, SearchAxis)
            for t in a.trials
        )

    @property
    def configurations(self) -> int:
        """The distinct configurations evaluated (with an objective or failed)."""
        trials = [t.config_hash for a in self.axes for t in a.trials]
        trials += [t.config_hash for t in (self.search.trials if self.search else ())]
        return len({config_hash for config_hash in trials if config_hash})

    def to_dict(self) -> dict[str, Any]:
        final = None
        if self.final is not None:
            final = {
                "objective": self.final.objective,
                "config_hash": self.final.config_hash,
                "run_id": self.final.run_id,
                "run_dir": None if self.final.run_dir is None else str(self.final.run_dir),
                "command": "ragsweep " + " ".join(self.final.overrides),
                "overrides": list(self.final.overrides),
                "config": self.final.config,
            }
        return {
            "sweep": self.spec.name,
            "file": str(self.spec.path),
            "objective": self.spec.objective,
            "direction": self.spec.direction,
            "min_improvement": self.spec.min_improvement,
            "decision": self.spec.decision,
            "alpha": self.spec.alpha,
            "resamples": self.spec.resamples,
            "seed": self.spec.seed,
            "adjust": self.spec.adjust,
            "family_size": self.spec.family_size,
            "interval_level": 1.0 - self.spec.alpha,
            "strategy": self.spec.strategy,
            "max_passes": self.spec.passes,
            "passes": self.passes,
            "stopped": self.stopped,
            **({"trials": self.spec.trials} if self.spec.searches else {}),
            "configurations": self.configurations,
            "evaluated": list(self.evaluated),
            "parent_run_id": self.parent_run_id,
            "complete": self.final is not None,
            "chosen": {t["axis"]: t["chosen"] for t in self.trail},
            "trail": self.trail,
            "final": final,
            "axes": [a.to_dict() for a in self.axes],
            "skipped": [s.to_dict() for s in self.skipped],
            **({"search": self.search.to_dict()} if self.search is not None else {}),
        }

    def write_yaml(self, path: Path) -> Path:
        """Write the result as a whole (``ragsweep best`` may read it meanwhile)."""
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)
        write_text_atomic(path, text)
        return path
