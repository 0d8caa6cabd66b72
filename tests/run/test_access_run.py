"""A run on a corpus with access metadata counts what it must not have retrieved (issue 30):
per case in cases.jsonl, in the summary, report.md and the MLflow metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from rich.console import Console

from ragsweep.config.app import plain_config
from ragsweep.config.schema import RetrievalConfig, result_fields
from ragsweep.core.errors import ConfigError
from ragsweep.release.gate import check_access
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import run_evaluation, run_stages
from tests.access_project import CASES, write_access_project


def test_leaks_are_counted_per_case_and_logged(
    compose_config, tmp_path: Path, tracking_db: Path
) -> None:
    overrides = write_access_project(tmp_path / "project")
    resolved = plain_config(compose_config(*overrides, "retrieval.acl=off"))
    console = Console(record=True, width=120)
    result = run_evaluation(resolve(resolved), tmp_path / "run", console)
    out = result.output_dir
    rows = {
        row["id"]: row
        for row in map(json.loads, (out / "cases.jsonl").read_text("utf-8").splitlines())
    }
    anyone = rows["bonus-anyone"]
    assert anyone["metrics"] is None  # a permission case is not scored as recall
    assert anyone["access"]["acl_leaks"] >= 1 and anyone["access"]["permission_held"] == 0
    assert anyone["access"]["revoked_retrieved"] == 1  # pay-old answers it too
    assert 1 <= anyone["access"]["acl_leaks_at_1000c"] <= anyone["access"]["acl_leaks"]
    readers = {"pay": {"hr"}, "merger": {"exec"}}
    for case in CASES:  # each count, recomputed from the retrieved documents
        docs = rows[case["id"]]["retrieved"]["doc"]
        groups = set(case.get("principal", []))
        leaks = sum(d in readers and not readers[d] & groups for d in docs)
        assert rows[case["id"]]["access"]["acl_leaks"] == leaks, case["id"]
        assert rows[case["id"]]["access"]["revoked_retrieved"] == docs.count("pay-old")
    assert "pay" in rows["bonus-hr"]["retrieved"]["doc"]  # hr may read it: no leak
    assert rows["remote"]["access"]["superseded_retrieved"] == 1

    totals = result.summary.access
    assert totals["n_permission"] == 2 and totals["acl_leaks"] > 0
    assert totals["cases_with_acl_leaks"] == sum(
        r["access"]["acl_leaks"] > 0 for r in rows.values()
    )
    assert "LEAK:" in console.export_text()
    report = (out / "report.md").read_text("utf-8")
    assert "## Access" in report and "LEAK:" in report

    violations = check_access(result.summary.flat_metrics())  # the gate fails on a leak
    assert [v.kind for v in violations] == ["leak", "leak"]
    assert violations[0].message.startswith(f"acl_leaks: {totals['acl_leaks']:g} retrieved")

    metrics = MlflowClient(f"sqlite:///{tracking_db}").get_run(result.run_id).data.metrics
    for key in ("acl_leaks", "revoked_retrieved", "superseded_retrieved", "acl_leaks_at_2000c"):
        assert metrics[key] == totals[key], key
    assert metrics["permission_held"] == totals["permission_held"] < 1
    assert metrics["permission_held_ci_low"] <= metrics["permission_held"]


SMALL = ("tracking.enabled=false", "eval.ks=[1,2]", "eval.budgets=[60]", "retrieval.top_k=2")


def test_filters_retrieve_nothing_restricted_and_refill(compose_config, tmp_path: Path) -> None:
    overrides = [*write_access_project(tmp_path / "project"), *SMALL, "eval.objective=hit_at_2"]

    def run(*extra: str) -> tuple[dict[str, float], dict[str, list[str]]]:
        done = run_stages(resolve(plain_config(compose_config(*overrides, *extra))))
        if "retrieval.acl=off" not in extra:
            assert check_access(done.summary.flat_metrics()) == []  # the gate passes
        return done.summary.access, {r.id: [c.doc for c in r.retrieved] for r in done.results}

    pre, pre_docs = run()  # the default; its rankings are cached before the others run
    post, post_docs = run("retrieval.acl=post")
    off, off_docs = run("retrieval.acl=off")  # a key of its own: not pre's cached rankings
    for totals in (pre, post):
        assert totals["acl_leaks"] == totals["revoked_retrieved"] == 0
        assert totals["permission_held"] == 1.0
    assert off["acl_leaks"] > 0 and off["revoked_retrieved"] > 0
    assert off_docs["bonus-hr"] == ["pay", "pay-old"]  # revoked pay-old: post refills past it
    assert post_docs["bonus-hr"] == pre_docs["bonus-hr"] == ["pay", "handbook"]
    assert post_docs == pre_docs
    latest, latest_docs = run("retrieval.acl=post", "retrieval.latest_only=true")
    assert pre["superseded_retrieved"] == 1 and latest["superseded_retrieved"] == 0
    assert latest_docs["remote"] == ["remote-v2"]


def test_acl_setting_is_checked_and_hashed_only_when_set() -> None:
    with pytest.raises(ConfigError, match=r"acl='prw' is not one of: pre, post, off; did"):
        RetrievalConfig(acl="prw")
    assert "acl" not in result_fields(RetrievalConfig())  # default configs keep their hash
    assert result_fields(RetrievalConfig(acl="off", latest_only=True))["acl"] == "off"
