"""Runs report the slice of accepted drafts beside the hand-written cases (issue 28): each
case carries its origin into ``cases.jsonl``, and the summary, ``report.md``, the terminal
summary, ``by_type.json`` and the MLflow metrics show ``by_origin/<origin>/...``."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow.tracking import MlflowClient
from rich.console import Console

from ragsweep.config.schema import EvalConfig
from ragsweep.eval.scoring import CaseResult, summarize
from ragsweep.run.metrics import BY_TYPE_FILE, ORIGIN_SLICE
from ragsweep.run.report import print_summary, render_report
from ragsweep.tracking.tables import read_table
from tests.run.test_pipeline import evaluate


def _draft_q2(project: Path) -> None:
    golden = project / "golden.jsonl"
    rows = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row["id"] == "q2":
            row["origin"] = "drafted"
    golden.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_run_reports_the_drafted_slice(compose_config, mini_project: Path, tracking_db) -> None:
    _draft_q2(mini_project)
    result, _ = evaluate(compose_config, mini_project)
    out = result.output_dir
    cases = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert {c["id"]: c["origin"] for c in cases} == {
        "q1": "hand",
        "q2": "drafted",
        "q3": "hand",
        "q4": "hand",
    }
    summary = result.summary
    drafted = next(c for c in cases if c["id"] == "q2")["metrics"]
    assert summary.by_origin["drafted"] == drafted
    assert summary.origin_counts == {"drafted": 1, "hand": 2}
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## By origin" in report and "drafted (n=1)" in report and "hand (n=2)" in report

    run = MlflowClient(tracking_uri=f"sqlite:///{tracking_db}").get_run(result.run_id)
    metrics = run.data.metrics
    assert metrics["by_origin/drafted/mrr"] == drafted["mrr"]
    assert metrics["by_origin/drafted/n_answerable"] == 1
    assert "by_origin/hand/recall_at_5_ci_low" in metrics
    rows = read_table((out / BY_TYPE_FILE).read_text(encoding="utf-8"), BY_TYPE_FILE)
    origin_rows = [r for r in rows if r["slice"] == ORIGIN_SLICE and r["measure"] == "mrr"]
    assert {r["type"]: r["n"] for r in origin_rows} == {"drafted": 1, "hand": 2}


def _result(index: int, origin: str, hit: float) -> CaseResult:
    metrics = {"hit_at_1": hit, "mrr": hit}
    return CaseResult(f"q{index}", "factual", "tuning", True, metrics, (), 0.001, origin=origin)


def test_one_origin_is_no_slice_and_two_are_shown_in_the_terminal() -> None:
    cfg = EvalConfig(ks=[1], budgets=[], bootstrap_resamples=50)
    hand_only = summarize([_result(i, "hand", float(i % 2)) for i in range(4)], cfg)
    assert hand_only.by_origin == {}
    assert not any(k.startswith("by_origin/") for k in hand_only.flat_metrics())
    assert "By origin" not in render_report(hand_only, cfg, "t", {})

    mixed = summarize([_result(i, "drafted" if i < 2 else "hand", float(i)) for i in range(4)], cfg)
    assert mixed.by_origin["drafted"]["hit_at_1"] == 0.5
    assert mixed.flat_metrics()["by_origin/hand/n_answerable"] == 2
    console = Console(record=True, width=200)
    print_summary(mixed, cfg, {}, console)
    assert "origin:drafted" in console.export_text()
