"""The nightly record: run the gate, append what it measured to ``eval_logs/YYYY-MM-DD.json``
and mark the day ``needs review`` when any retrieval metric fell by ``drop`` (default 0.05)
or more since the previous logged run, or when the gate failed. It executes and records
only: no config and no thresholds file is changed.

A day file holds ``{"date", "summary": {"status", "reasons", "runs"}, "runs": [entry...]}``;
an entry holds the time, the promoted run and its origin, the config hash, the retrieval
metrics (MLflow names), the latency percentiles (ms), the gate status with its violations,
the time of the previous logged run it was compared with, and the drops found.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from ragsweep.core import tags as tag
from ragsweep.release.compare import LATENCY_KEYS
from ragsweep.release.errors import EvalLogError
from ragsweep.release.gate import FLOAT_TOLERANCE, GateOutcome, run_gate
from ragsweep.release.store import RunStore
from ragsweep.release.thresholds import Thresholds, is_quality_metric

DEFAULT_DROP = 0.05
NEEDS_REVIEW = "needs review"
OK = "ok"


@dataclass(frozen=True)
class Observation:
    """What one nightly gate run measured. ``metrics`` are flat MLflow-named metrics."""

    at: datetime
    promoted_run: str
    promoted_from: str
    config_hash: str
    metrics: dict[str, float]
    violations: tuple[str, ...]

    @classmethod
    def from_outcome(cls, outcome: GateOutcome, at: datetime) -> Observation:
        return cls(
            at=at,
            promoted_run=outcome.promoted.run_id,
            promoted_from=outcome.promoted.tags.get(tag.PROMOTED_FROM, ""),
            config_hash=outcome.result.config_hash,
            metrics=outcome.metrics,
            violations=tuple(v.message for v in outcome.violations),
        )


@dataclass(frozen=True)
class Drop:
    """A retrieval metric that fell from ``previous`` to ``current``."""

    metric: str
    previous: float
    current: float

    @property
    def fall(self) -> float:
        return self.previous - self.current

    def describe(self) -> str:
        return f"{self.metric} fell {self.fall:.3f} ({self.previous:.3f} → {self.current:.3f})"


@dataclass(frozen=True)
class DayRecord:
    """The day file written, the entry appended to it and the day's status."""

    path: Path
    entry: dict[str, Any]
    status: str


def find_drops(
    previous: Mapping[str, float], current: Mapping[str, float], drop: float
) -> list[Drop]:
    """Metrics present in both whose value fell by ``drop`` or more."""
    return [
        Drop(metric, previous[metric], current[metric])
        for metric in sorted(set(previous) & set(current))
        # a fall of exactly `drop` counts even when float subtraction lands a hair below it
        if previous[metric] - current[metric] >= drop - FLOAT_TOLERANCE
    ]


def previous_entry(log_dir: Path, day: date) -> dict[str, Any] | None:
    """The last entry logged on ``day`` or the latest earlier day that has one."""
    days = sorted(p for p in log_dir.glob("????-??-??.json") if p.stem <= day.isoformat())
    for path in reversed(days):
        runs = _read_day(path).get("runs") or []
        if runs:
            return dict(runs[-1])
    return None


def day_summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``needs review`` with one reason per failed gate or drop in the day's runs, else ok."""
    reasons = []
    for run in runs:
        reasons += [f"{run['at']}: gate failed: {v}" for v in run["violations"]]
        reasons += [f"{run['at']}: {d} since {run['compared_with']}" for d in run["drops"]]
    return {"status": NEEDS_REVIEW if reasons else OK, "reasons": reasons, "runs": len(runs)}


def record(log_dir: Path, observation: Observation, drop: float = DEFAULT_DROP) -> DayRecord:
    """Append ``observation`` to its day file and recompute the day's summary."""
    day = observation.at.date()
    previous = previous_entry(log_dir, day)
    metrics = {k: v for k, v in observation.metrics.items() if is_quality_metric(k)}
    drops = find_drops(previous["metrics"], metrics, drop) if previous else []
    entry = {
        "at": observation.at.isoformat(timespec="seconds"),
        "promoted_run": observation.promoted_run,
        "promoted_from": observation.promoted_from,
        "config_hash": observation.config_hash,
        "gate": "failed" if observation.violations else "passed",
        "violations": list(observation.violations),
        "compared_with": previous["at"] if previous else None,
        "drop_threshold": drop,
        "drops": [d.describe() for d in drops],
        "metrics": metrics,
        "latency_ms": {k: observation.metrics[k] for k in LATENCY_KEYS if k in observation.metrics},
    }
    path = log_dir / f"{day.isoformat()}.json"
    document = _read_day(path) if path.is_file() else {"date": day.isoformat(), "runs": []}
    runs = [*document.get("runs", []), entry]
    summary = day_summary(runs)
    _write_json(path, {"date": day.isoformat(), "summary": summary, "runs": runs})
    return DayRecord(path=path, entry=entry, status=summary["status"])


def run_nightly(
    store: RunStore,
    thresholds: Thresholds,
    log_dir: Path,
    work_dir: Path,
    now: datetime,
    drop: float = DEFAULT_DROP,
    console: Console | None = None,
) -> DayRecord | None:
    """Run the gate into ``work_dir`` and record it in ``log_dir``; None if nothing has
    been promoted yet (nothing is recorded then)."""
    outcome = run_gate(store, thresholds, work_dir, console=console)
    if outcome is None:
        return None
    return record(log_dir, Observation.from_outcome(outcome, now), drop)


def _read_day(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvalLogError(f"{path}: cannot read the day file ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("runs", []), list):
        raise EvalLogError(f"{path}: not a nightly day file (expected an object with 'runs')")
    return data


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write via a temporary file and a rename, so a crash never leaves half a day file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
