"""cases.jsonl rows: the columnar layout, and rows written before it."""

from __future__ import annotations

import json

from ragsweep.eval.scoring import CaseResult, RetrievedChunk


def _result(retrieved: tuple[RetrievedChunk, ...]) -> CaseResult:
    metrics = {"hit_at_1": 1.0} if retrieved else None
    return CaseResult("q1", "factual", "tuning", bool(retrieved), metrics, retrieved, 0.00125)


def test_rows_store_retrieved_chunks_by_column_and_read_back() -> None:
    chunks = (RetrievedChunk("a@0-9", "a", 0, 9, 0.5), RetrievedChunk("b@3-7", "b", 3, 7, 0.25))
    row = json.loads(json.dumps(_result(chunks).to_json()))
    assert row["retrieved"] == {
        "chunk_id": ["a@0-9", "b@3-7"],
        "doc": ["a", "b"],
        "start": [0, 3],
        "end": [9, 7],
        "score": [0.5, 0.25],
    }
    assert row["latency_ms"] == 1.25
    assert CaseResult.from_json(row) == _result(chunks)


def test_an_empty_ranking_keeps_every_column() -> None:
    row = json.loads(json.dumps(_result(()).to_json()))
    assert row["retrieved"] == {"chunk_id": [], "doc": [], "start": [], "end": [], "score": []}
    assert CaseResult.from_json(row).retrieved == ()


def test_rows_written_before_the_columnar_layout_are_still_read() -> None:
    old = {
        "id": "q1",
        "type": "factual",
        "split": "tuning",
        "answerable": True,
        "metrics": {"hit_at_1": 1.0},
        "latency_ms": 1.25,
        "retrieved": [{"chunk_id": "a@0-9", "doc": "a", "start": 0, "end": 9, "score": 0.5}],
    }
    assert CaseResult.from_json(old).retrieved == (RetrievedChunk("a@0-9", "a", 0, 9, 0.5),)
