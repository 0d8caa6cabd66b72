"""Nightly record: day files in eval_logs/, drops against the previous logged run."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from rich.console import Console

from ragsweep.cli.release import nightly_main
from ragsweep.release.nightly import Observation, find_drops, record
from ragsweep.release.promote import promote
from ragsweep.release.store import RunStore
from ragsweep.release.thresholds import Thresholds, save_thresholds
from tests.release_support import add_holdout_cases, evaluate, store_uri

DAY1 = datetime(2026, 3, 1, 2, 30, tzinfo=timezone.utc)


def observe(at: datetime, recall: float, violations: tuple[str, ...] = ()) -> Observation:
    return Observation(
        at=at,
        promoted_run="run-h",
        promoted_from="run-t",
        config_hash="abc",
        metrics={"recall_at_5": recall, "mrr": 0.7, "latency_ms_p95": 3.0, "n_cases": 30.0},
        violations=violations,
    )


def day_file(log_dir: Path, at: datetime) -> dict:
    return json.loads((log_dir / f"{at.date().isoformat()}.json").read_text(encoding="utf-8"))


def test_a_drop_of_005_since_the_previous_day_needs_review(tmp_path: Path) -> None:
    first = record(tmp_path, observe(DAY1, 0.80))
    second = record(tmp_path, observe(DAY1 + timedelta(days=1), 0.75))

    assert first.status == "ok" and first.entry["compared_with"] is None
    assert second.status == "needs review"
    day2 = day_file(tmp_path, DAY1 + timedelta(days=1))
    assert day2["summary"]["status"] == "needs review"
    assert day2["summary"]["reasons"] == [
        "2026-03-02T02:30:00+00:00: recall_at_5 fell 0.050 (0.800 → 0.750) "
        "since 2026-03-01T02:30:00+00:00"
    ]
    entry = day2["runs"][0]
    assert entry["metrics"] == {"recall_at_5": 0.75, "mrr": 0.7}  # retrieval metrics only
    assert entry["latency_ms"] == {"latency_ms_p95": 3.0}
    assert day_file(tmp_path, DAY1)["summary"]["status"] == "ok"  # the earlier day is untouched


@pytest.mark.parametrize("recall", [0.76, 0.80, 0.95])
def test_smaller_falls_and_rises_do_not(tmp_path: Path, recall: float) -> None:
    record(tmp_path, observe(DAY1, 0.80))
    later = record(tmp_path, observe(DAY1 + timedelta(days=1), recall))
    assert later.status == "ok" and later.entry["drops"] == []
    assert later.entry["compared_with"] == "2026-03-01T02:30:00+00:00"


def test_runs_on_the_same_day_append_and_compare_with_the_last(tmp_path: Path) -> None:
    record(tmp_path, observe(DAY1, 0.80))
    record(tmp_path, observe(DAY1 + timedelta(hours=1), 0.70))
    third = record(tmp_path, observe(DAY1 + timedelta(hours=2), 0.70))
    day = day_file(tmp_path, DAY1)
    assert [r["metrics"]["recall_at_5"] for r in day["runs"]] == [0.80, 0.70, 0.70]
    assert third.entry["drops"] == []  # compared with the 0.70 run, not the first
    assert day["summary"]["status"] == "needs review"  # the second run's drop stays on the day


def test_a_failed_gate_needs_review(tmp_path: Path) -> None:
    failed = record(tmp_path, observe(DAY1, 0.5, ("recall_at_5 dropped to 0.500 (floor 0.60)",)))
    assert failed.entry["gate"] == "failed" and failed.status == "needs review"


def test_drop_threshold_is_inclusive() -> None:
    (drop,) = find_drops({"a": 0.3}, {"a": 0.25}, 0.05)  # 0.3 − 0.25 is 0.04999... in floats
    assert drop.describe() == "a fell 0.050 (0.300 → 0.250)"
    assert find_drops({"a": 0.3}, {"a": 0.26}, 0.05) == []


def test_nightly_cli_records_the_gate_and_changes_no_config(
    compose_config, mini_project: Path, tracking_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = add_holdout_cases(mini_project)
    tuning = evaluate(compose_config, project, "tuning")
    store = RunStore(store_uri(project))
    promotion = promote(
        store, str(tuning.run_id), project / "p", console=Console(file=io.StringIO())
    )
    thresholds = project / "thresholds.yaml"
    save_thresholds(thresholds, Thresholds(floors={"recall_at_5": 0.0}, max_decline=0.05))
    before = thresholds.read_bytes()
    log_dir = project / "eval_logs"
    args = [
        "--tracking-uri",
        store.uri,
        "--log-dir",
        str(log_dir),
        "--thresholds",
        str(thresholds),
        "--work-dir",
        str(project / "nightly"),
    ]

    for _ in range(2):
        with pytest.raises(SystemExit) as exit_info:
            nightly_main(args)
        assert exit_info.value.code == 0

    (path,) = log_dir.glob("*.json")
    day = json.loads(path.read_text(encoding="utf-8"))
    assert day["summary"] == {"status": "ok", "reasons": [], "runs": 2}
    first, second = day["runs"]
    assert first["promoted_run"] == promotion.holdout.run_id
    assert first["promoted_from"] == tuning.run_id
    assert first["gate"] == "passed"
    assert first["metrics"]["recall_at_5"] == promotion.holdout.summary.overall["recall_at_5"]
    assert second["compared_with"] == first["at"] and second["drops"] == []
    assert thresholds.read_bytes() == before
    assert "day status: ok" in capsys.readouterr().out

    save_thresholds(thresholds, Thresholds(floors={"mrr": 1.0}))
    with pytest.raises(SystemExit) as exit_info:
        nightly_main(args)
    assert exit_info.value.code == 1
    assert json.loads(path.read_text(encoding="utf-8"))["summary"]["status"] == "needs review"
