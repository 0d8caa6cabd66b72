"""Question types MLflow does not accept in metric names (issue 12, item 3): every type maps
to a valid, unique, stable key, checked with MLflow's own validator and end to end against a
real SQLite store; the original names stay in the report, cases.jsonl and a tag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from mlflow.utils.validation import _validate_metric_name

from ragsweep.core import tags as tag
from ragsweep.core.hashing import sha256_text
from ragsweep.eval.metric_keys import HASH_CHARS, by_type_key, type_names, type_segment
from ragsweep.release.store import RunStore
from tests.conftest import write_jsonl
from tests.run.test_pipeline import evaluate

AWKWARD = [
    "R&D",
    "C++",
    "how-to (UI)",
    "50%",
    "a/b",
    "..",
    ".",
    "",
    " padded ",
    "tab\tname",
    "emoji 🙂",
    "x" * 300,
    "R_D",  # the slug of R&D, as a type of its own
]
ACCEPTED = ["factual", "multi-hop", "ログイン", "v1.2: edge cases"]


@pytest.mark.parametrize("name", AWKWARD + ACCEPTED)
def test_every_type_gives_keys_mlflow_accepts(name: str) -> None:
    for metric in ("recall_at_5", "mrr"):
        _validate_metric_name(by_type_key(name, metric))  # MLflow's own check: raises if bad
        _validate_metric_name(by_type_key(name, metric, "judge/by_type"))
    assert len(by_type_key(name, "coverage_at_10", "judge/by_type")) <= 250


def test_keys_are_unique_and_stable() -> None:
    names = AWKWARD + ACCEPTED
    segments = [type_segment(n) for n in names]
    assert len(set(segments)) == len(names)
    assert [type_segment(n) for n in names] == segments
    # lossy names carry a hash of the full name: stable across processes and versions
    assert type_segment("R&D") == f"R_D-{sha256_text('R&D')[:HASH_CHARS]}"
    # a name that looks like a hashed key is hashed too, so it cannot take another's key
    assert type_segment(type_segment("R&D")) != type_segment("R&D")


@pytest.mark.parametrize("name", ACCEPTED)
def test_names_mlflow_accepts_are_kept(name: str) -> None:
    assert type_segment(name) == name


TYPED_GOLDEN = [
    ("q1", "How long do refunds take?", "R&D", "billing.md", "Refunds are issued within 14 days"),
    ("q2", "How do I export my notes?", "C++", "billing.md", "export all notes as a ZIP archive"),
    ("q3", "VPN サーバー", "how-to (UI)", "ja/login.md", "VPN経由でサーバーに接続できない"),
    ("q4", "Where does the refund go?", "50%", "billing.md", "original payment method"),
    ("q5", "Refund timing", "factual", "billing.md", "within 14 days of the request"),
]


def test_awkward_types_log_end_to_end_to_a_real_store(
    compose_config, mini_project: Path, tracking_db: Path
) -> None:
    rows = [
        {
            "id": case_id,
            "question": question,
            "type": type_name,
            "split": "tuning",
            "evidence": [{"doc": doc, "quote": quote}],
        }
        for case_id, question, type_name, doc, quote in TYPED_GOLDEN
    ]
    rows.append(
        {"id": "q6", "question": "Is there a pony?", "type": "50%", "answerable": False}
        | {"split": "tuning"}
    )
    write_jsonl(mini_project / "golden.jsonl", rows)
    result, _ = evaluate(compose_config, mini_project)

    client = MlflowClient(f"sqlite:///{tracking_db}")
    logged = client.get_run(result.run_id)
    assert logged.info.status == "FINISHED"
    assert logged.data.tags[tag.LOGGED] == "complete"
    metrics = RunStore(f"sqlite:///{tracking_db}").get(result.run_id).metrics  # figures.json
    types = {t for _, _, t, _, _ in TYPED_GOLDEN}
    assert set(result.summary.by_type) == types
    for type_name in types:
        segment = type_segment(type_name)
        expected = result.summary.by_type[type_name]["recall_at_5"]
        assert metrics[f"by_type/{segment}/recall_at_5"] == pytest.approx(expected)
        assert metrics[f"n_cases/{segment}"] == result.summary.type_counts[type_name]
    assert metrics["by_type/factual/recall_at_5"] >= 0  # accepted names keep their key
    renamed = json.loads(logged.data.tags[tag.TYPE_KEYS])
    assert renamed == {type_segment(t): t for t in types - {"factual"}}
    assert type_names(logged.data.tags, renamed) == types - {"factual"}

    report = (result.output_dir / "report.md").read_text(encoding="utf-8")
    for type_name in types:
        assert f"| {type_name} (n=" in report  # the original name in the type table
    assert f"R&D → `by_type/{type_segment('R&D')}/…`" in report
    cases = (result.output_dir / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    assert {json.loads(line)["type"] for line in cases} == types
