"""Release quality gate (``make gate``; docs/promotion.md).

The promoted config (the newest complete run tagged ``ragsweep.promoted_from`` in the current
MLflow store, or ``$RAGSWEEP_GATE_RUN``) is evaluated again on the holdout split now and must
meet every limit in the thresholds file (``conf/gate/thresholds.yaml`` or
``$RAGSWEEP_GATE_THRESHOLDS``). The store is ``$MLFLOW_TRACKING_URI`` or the project's
configured one. Nothing promoted yet: every test is skipped, saying so.

Not part of the fast suite: ``pytest -q`` deselects the ``quality`` marker; run it with
``pytest -m quality tests/quality``.
"""

from __future__ import annotations

import pytest

from ragsweep.release.errors import RunLookupError
from ragsweep.release.gate import GateOutcome, run_gate
from ragsweep.release.store import RunStore, current_config, current_tracking_uri
from ragsweep.release.thresholds import Thresholds, default_path, load_thresholds

pytestmark = pytest.mark.quality


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One ``test_floor`` per floor, read from the thresholds file at collection time."""
    if "metric" in metafunc.fixturenames:
        metafunc.parametrize("metric", sorted(load_thresholds(default_path()).floors))


@pytest.fixture(scope="module")
def thresholds() -> Thresholds:
    return load_thresholds(default_path())


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory, thresholds: Thresholds) -> GateOutcome:
    try:
        store = RunStore(current_tracking_uri(current_config()))
    except RunLookupError as exc:
        pytest.skip(f"nothing promoted yet: {exc}")
    result = run_gate(store, thresholds, tmp_path_factory.mktemp("gate"))
    if result is None:
        pytest.skip(
            f"nothing promoted yet: no complete run tagged ragsweep.promoted_from in "
            f"{store.uri}; promote one with `ragsweep-promote RUN_ID` (or `make promote`)"
        )
    return result


def _fail_on(outcome: GateOutcome, kind: str, metric: str | None = None) -> None:
    messages = [
        v.message
        for v in outcome.violations
        if v.kind == kind and (metric is None or v.metric == metric)
    ]
    if messages:
        pytest.fail("\n".join(messages), pytrace=False)


def test_floor(outcome: GateOutcome, metric: str) -> None:
    _fail_on(outcome, "floor", metric)


def test_latency_p95(outcome: GateOutcome, thresholds: Thresholds) -> None:
    if thresholds.max_latency_ms_p95 is None:
        pytest.skip("max_latency_ms_p95 is not set")
    _fail_on(outcome, "latency")


def test_no_decline_against_baseline(outcome: GateOutcome, thresholds: Thresholds) -> None:
    if thresholds.max_decline is None or thresholds.baseline_run is None:
        pytest.skip("max_decline or baseline_run is not set")
    _fail_on(outcome, "decline")


def test_no_access_leak(outcome: GateOutcome) -> None:
    _fail_on(outcome, "leak")
