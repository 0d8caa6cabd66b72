"""``embedding=external``: rankings made by another system, scored with the same metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsweep.config.app import plain_config
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.run.config import resolve
from tests.conftest import HANDBOOK, write_jsonl
from tests.run.test_pipeline import evaluate, project_overrides

OFF = "tracking.enabled=false"


def external(rankings: Path, chunks: Path | None = None) -> tuple[str, ...]:
    manifest = (f"embedding.options.chunks={chunks}",) if chunks else ()
    return ("embedding=external", f"embedding.options.rankings={rankings}", *manifest, OFF)


def exported(result, path: Path, by_id: bool) -> Path:
    """A run's rankings written out as another system would export them."""
    rows = []
    for case in result.cases:
        if by_id:
            ranked = [r.chunk_id for r in case.retrieved]
        else:
            ranked = [
                {"doc": r.doc, "start": r.start, "end": r.end, "score": r.score}
                for r in case.retrieved
            ]
        rows.append({"id": case.id, "ranked": ranked, "latency_ms": 2.5})
    return write_jsonl(path, rows)


@pytest.mark.parametrize("by_id", [False, True])
def test_another_systems_rankings_score_as_that_system(
    compose_config, mini_project: Path, by_id: bool
) -> None:
    bm25, _ = evaluate(compose_config, mini_project, OFF)
    rankings = exported(bm25, mini_project / "run.jsonl", by_id)
    manifest = None
    if by_id:
        rows = [json.loads(line) for line in (bm25.output_dir / "chunks.jsonl").open()]
        manifest = write_jsonl(
            mini_project / "manifest.jsonl",
            [{k: r[k] for k in ("chunk_id", "doc", "start", "end")} for r in rows],
        )
    scored, _ = evaluate(compose_config, mini_project, *external(rankings, manifest))
    assert [c.metrics for c in scored.cases] == [c.metrics for c in bm25.cases]
    assert scored.summary.overall == bm25.summary.overall
    # a manifest lists the system's chunks: the chunk that hits a span is recorded
    assert all(t.chunked == by_id for c in scored.cases for t in c.spans or ())
    assert scored.summary.extra["latency_ms_p50"] == pytest.approx(2.5)


def test_spans_of_any_shape_are_scored_by_the_span_rule(compose_config, mini_project: Path) -> None:
    whole = {"doc": "billing.md", "start": 0, "end": len(HANDBOOK)}
    rankings = write_jsonl(
        mini_project / "run.jsonl",
        [
            {"id": "q1", "ranked": [whole]},  # the evidence lies inside the whole document
            {"id": "q2", "ranked": [{"doc": "billing.md", "start": 0, "end": 9}]},
            {"id": "q3", "ranked": []},
            {"id": "q4", "ranked": [whole]},
        ],
    )
    scored, _ = evaluate(compose_config, mini_project, *external(rankings))
    metrics = {c.id: c.metrics for c in scored.cases}
    assert metrics["q1"] is not None and metrics["q1"]["hit_at_1"] == 1.0
    assert metrics["q2"] is not None and metrics["q2"]["hit_at_1"] == 0.0
    assert metrics["q3"] is not None and metrics["q3"]["mrr"] == 0.0
    assert metrics["q4"] is None  # unanswerable: counted, not scored
    assert scored.cases[0].retrieved[0].score == 1.0  # no score given: 1/rank
    # no manifest: which chunk would hit q2's evidence is unknown, not "split"
    rows = [c.to_json()["spans"] for c in scored.cases if c.spans is not None]
    assert rows and all(len(span) == 1 for row in rows for span in row)
    assert not any(t.split for c in scored.cases for t in c.spans or ())


@pytest.mark.parametrize(
    ("line", "manifest", "error", "message"),
    [
        ({"id": "q1", "ranked": ["c9"]}, None, ConfigError, r"chunk id 'c9' is not in the chunk"),
        ({"id": "q1", "ranked": [{"doc": "x.md"}]}, None, ConfigError, r"needs doc, start and end"),
        ({"ranked": []}, None, ConfigError, r"run.jsonl:1: a ranking needs the case id"),
        (
            {"id": "q1", "ranked": [{"doc": "nope.md", "start": 0, "end": 5}]},
            None,
            ConfigError,
            r"no document 'nope.md'",
        ),
        (
            {"id": "q1", "ranked": [{"doc": "billing.md", "start": 0, "end": 99999}]},
            None,
            ConfigError,
            r"lies outside 'billing.md'",
        ),
        (
            {"id": "q1", "ranked": [{"doc": "billing.md", "start": 0, "end": 9}]},
            None,
            BackendError,
            r"no line for 3 case\(s\), e.g. q2, q3, q4",
        ),
    ],
)
def test_bad_external_runs_name_the_problem(
    compose_config, mini_project: Path, line, manifest, error, message
) -> None:
    rankings = write_jsonl(mini_project / "run.jsonl", [line])
    with pytest.raises(error, match=message):
        evaluate(compose_config, mini_project, *external(rankings, manifest))


def test_a_lone_surrogate_in_a_run_names_its_line(compose_config, mini_project: Path) -> None:
    rankings = mini_project / "run.jsonl"
    rankings.write_text(json.dumps({"id": "q1", "ranked": ["c\ud800"]}) + "\n", "utf-8")
    with pytest.raises(ConfigError, match=r"run.jsonl:1: 'ranked'\[0\] holds a lone surrogate"):
        evaluate(compose_config, mini_project, *external(rankings))


def test_missing_file_fails_before_work(compose_config, mini_project: Path) -> None:
    overrides = project_overrides(mini_project, *external(mini_project / "absent.jsonl"))
    with pytest.raises(
        ConfigError, match=r"embedding.options.rankings='.*absent.jsonl' is not a file"
    ):
        resolve(plain_config(compose_config(*overrides)))
