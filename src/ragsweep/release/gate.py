"""The release gate: re-evaluate the promoted config on the holdout split and check floors,
the p95 latency ceiling and the allowed decline against a baseline run.

"The promoted config" is the ``config.yaml`` of the newest complete run tagged
``ragsweep.promoted_from`` in the current store (``$RAGSWEEP_GATE_RUN`` pins one run id
instead). The gate's own evaluation is not logged to MLflow and does not count as a holdout
use: it re-scores a config that is already chosen and changes nothing. ``make gate`` runs it
as a pytest test; ``make nightly`` runs the same check and records it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from ragsweep.core import tags as tag
from ragsweep.core.names import HOLDOUT
from ragsweep.core.terminal import fit_markdown, markdown_table
from ragsweep.eval.metric_keys import ACL_LEAKS, CASES_WITH_ACL_LEAKS, REVOKED_RETRIEVED
from ragsweep.release.errors import RunLookupError, ThresholdsError
from ragsweep.release.store import LoggedRun, RunStore
from ragsweep.release.thresholds import PROMOTED_BASELINE, Thresholds
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import RunResult, run_evaluation

GATE_RUN_ENV = "RAGSWEEP_GATE_RUN"
# Float noise allowed when comparing a value with a floor, a decline limit or a drop.
FLOAT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Violation:
    """One failed check: ``kind`` is ``floor``, ``latency``, ``decline`` or ``leak``."""

    kind: str
    metric: str
    message: str


def format_limit(value: float) -> str:
    """A threshold as written by people: at least two decimals, no trailing noise."""
    text = f"{value:.6f}".rstrip("0")
    decimals = len(text.split(".")[1])
    return f"{value:.{max(2, decimals)}f}"


def _format_value(value: float, limit: float) -> str:
    """Three decimals, more when three would make a failing value look equal to its limit."""
    decimals = 3
    while decimals < 6 and f"{value:.{decimals}f}" == f"{limit:.{decimals}f}":
        decimals += 1
    return f"{value:.{decimals}f}"


def check_floors(metrics: Mapping[str, float], floors: Mapping[str, float]) -> list[Violation]:
    """``<metric> dropped to 0.742 (floor 0.80)`` for each metric below its floor."""
    violations = []
    for metric, floor in floors.items():
        value = metrics.get(metric)
        if value is None:
            message = f"{metric} is missing from the evaluation (floor {format_limit(floor)})"
            violations.append(Violation("floor", metric, message))
        elif value < floor - FLOAT_TOLERANCE:
            message = (
                f"{metric} dropped to {_format_value(value, floor)} (floor {format_limit(floor)})"
            )
            violations.append(Violation("floor", metric, message))
    return violations


def check_latency(metrics: Mapping[str, float], ceiling: float | None) -> list[Violation]:
    """The p95 per-query retrieval time (ms) against its ceiling."""
    value = metrics.get("latency_ms_p95")
    if ceiling is None or value is None or value <= ceiling:
        return []
    message = (
        f"latency_ms_p95 rose to {_format_value(value, ceiling)} ms "
        f"(max {format_limit(ceiling)} ms)"
    )
    return [Violation("latency", "latency_ms_p95", message)]


def check_access(metrics: Mapping[str, float]) -> list[Violation]:
    """Any chunk retrieved from a document its case's principal may not read, or from a
    revoked document, fails the gate whatever the averages (docs/metrics.md, "Access
    measures"); a run without access metadata has neither figure."""
    leaks, cases = metrics.get(ACL_LEAKS, 0.0), metrics.get(CASES_WITH_ACL_LEAKS, 0.0)
    violations = []
    if leaks > 0:
        message = (
            f"{ACL_LEAKS}: {leaks:g} retrieved chunk(s) in {cases:g} case(s) came from "
            "documents the case's principal may not read (any leak fails the gate)"
        )
        violations.append(Violation("leak", ACL_LEAKS, message))
    revoked = metrics.get(REVOKED_RETRIEVED, 0.0)
    if revoked > 0:
        message = f"{REVOKED_RETRIEVED}: {revoked:g} retrieved chunk(s) came from revoked documents"
        violations.append(Violation("leak", REVOKED_RETRIEVED, message))
    return violations


def check_decline(
    metrics: Mapping[str, float],
    baseline: Mapping[str, float],
    names: list[str],
    max_decline: float,
    baseline_label: str,
) -> list[Violation]:
    """Each of ``names`` that fell more than ``max_decline`` below the baseline's value."""
    violations = []
    for metric in names:
        if metric not in baseline or metric not in metrics:
            continue
        fall = baseline[metric] - metrics[metric]
        if fall > max_decline + FLOAT_TOLERANCE:
            message = (
                f"{metric} fell {fall:.3f} below {baseline_label} "
                f"({baseline[metric]:.3f} → {metrics[metric]:.3f}; "
                f"max decline {format_limit(max_decline)})"
            )
            violations.append(Violation("decline", metric, message))
    return violations


@dataclass(frozen=True)
class GateOutcome:
    """A gate evaluation: the promoted run it re-evaluated, the fresh result, its flat
    metrics (MLflow names) and every violation."""

    promoted: LoggedRun
    result: RunResult
    metrics: dict[str, float]
    violations: tuple[Violation, ...]

    @property
    def passed(self) -> bool:
        return not self.violations


def pinned_run() -> str | None:
    """The run ``$RAGSWEEP_GATE_RUN`` pins, None when it is unset. Set but empty (a script's
    ``RAGSWEEP_GATE_RUN="$RUN"`` with an empty ``RUN``) is a RunLookupError, not "unset":
    the gate would otherwise check the newest promoted run instead of the one meant."""
    value = os.environ.get(GATE_RUN_ENV)
    if value is not None and not value.strip():
        raise RunLookupError(
            f"${GATE_RUN_ENV} is set but empty, so it names no run: set it to the holdout "
            f"run id to check, or unset it (unset {GATE_RUN_ENV}) to check the newest "
            "promoted run"
        )
    return value


def find_promoted(store: RunStore, run_id: str | None = None) -> LoggedRun | None:
    """Run ``run_id`` (or ``$RAGSWEEP_GATE_RUN``: :func:`pinned_run`), else the newest
    complete promoted run; None when nothing has been promoted in this store."""
    if run_id is None:
        run_id = pinned_run()
    if run_id is None:
        latest = store.latest(f"tags.\"{tag.PROMOTED_FROM}\" LIKE '%'")
        return None if latest is None else store.with_figures(latest)
    run = store.get(run_id)
    run.require_complete()
    if run.tag(tag.SPLIT) != HOLDOUT:
        raise RunLookupError(f"run {run_id} is not a holdout run; the gate checks promoted runs")
    return run


def evaluate_promoted(
    store: RunStore, promoted: LoggedRun, output_dir: Path, console: Console | None = None
) -> RunResult:
    """Re-run the promoted run's logged config on the holdout split, without logging."""
    config = store.config(promoted.run_id)
    config["tracking"] = {**config.get("tracking", {}), "enabled": False}
    return run_evaluation(resolve(config), output_dir, console)


def baseline_for(
    store: RunStore, thresholds: Thresholds, promoted: LoggedRun
) -> tuple[str, dict[str, float]] | None:
    """(label, metrics) of the decline baseline, or None when the decline is not checked."""
    if thresholds.max_decline is None or thresholds.baseline_run is None:
        return None
    if thresholds.baseline_run == PROMOTED_BASELINE:
        return f"promoted run {promoted.run_id}", promoted.metrics
    run = store.get(thresholds.baseline_run)
    if run.tag(tag.SPLIT) != HOLDOUT or run.tag(tag.GOLDEN_DIGEST) != promoted.tag(
        tag.GOLDEN_DIGEST
    ):
        raise ThresholdsError(
            f"thresholds baseline_run {run.run_id} must be a holdout run on the promoted run's "
            f"golden set {promoted.tag(tag.GOLDEN_DIGEST)[:12]} "
            f"(it is a {run.tag(tag.SPLIT)} run on "
            f"{run.tag(tag.GOLDEN_DIGEST)[:12]})"
        )
    return f"baseline run {run.run_id}", run.metrics


def run_gate(
    store: RunStore,
    thresholds: Thresholds,
    output_dir: Path,
    run_id: str | None = None,
    console: Console | None = None,
) -> GateOutcome | None:
    """Evaluate the promoted config and check it; None when nothing has been promoted."""
    promoted = find_promoted(store, run_id)
    if promoted is None:
        return None
    result = evaluate_promoted(store, promoted, output_dir, console)
    metrics = result.summary.flat_metrics()
    violations = [
        *check_floors(metrics, thresholds.floors),
        *check_latency(metrics, thresholds.max_latency_ms_p95),
        *check_access(metrics),
    ]
    baseline = baseline_for(store, thresholds, promoted)
    if baseline is not None and thresholds.max_decline is not None:
        label, values = baseline
        names = list(thresholds.floors)
        violations += check_decline(metrics, values, names, thresholds.max_decline, label)
    return GateOutcome(promoted, result, metrics, tuple(violations))


def render_outcome(outcome: GateOutcome, thresholds: Thresholds) -> str:
    """Markdown: each floored metric with its value, floor and status, then violations."""
    failed = {v.metric for v in outcome.violations}
    rows = [
        [
            metric,
            f"{outcome.metrics[metric]:.4f}" if metric in outcome.metrics else "missing",
            format_limit(floor),
            "FAIL" if metric in failed else "ok",
        ]
        for metric, floor in thresholds.floors.items()
    ]
    lines = [
        "# Gate on the promoted run",
        "",
        f"- **promoted run**: `{outcome.promoted.run_id}`",
        f"- **promoted from**: `{outcome.promoted.tags.get(tag.PROMOTED_FROM, '?')}`",
        "",
        markdown_table(["metric", "holdout now", "floor", "status"], rows),
        "",
        f"**{'PASSED' if outcome.passed else 'FAILED'}**",
    ]
    lines += [f"- {v.message}" for v in outcome.violations]
    return fit_markdown("\n".join(lines)) + "\n"
