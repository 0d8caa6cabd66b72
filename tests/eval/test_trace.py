"""Span traces: the rank of each evidence span's first hit and the chunk holding it."""

from __future__ import annotations

import numpy as np

from ragsweep.chunk.chunkers import Chunk, make_chunk
from ragsweep.chunk.table import ChunkTable
from ragsweep.config.schema import EvalConfig
from ragsweep.data.corpus import Corpus, Document
from ragsweep.data.golden import EvidenceSpan, GoldenCase
from ragsweep.eval.relevance import IntervalBatch, doc_codes
from ragsweep.eval.scoring import CaseResult, score_cases
from ragsweep.eval.trace import ChunkIntervals, SpanTrace, span_traces
from ragsweep.index.base import Ranked

CHUNKS = [("b.md", 0, 50), ("a.md", 0, 100), ("a.md", 90, 200), ("a.md", 0, 400)]


def test_rank_and_the_shortest_chunk_that_holds_each_span() -> None:
    chunks = ChunkIntervals.of(
        [Chunk(f"{d}@{s}-{e}", d, s, e, "x" * (e - s), ()) for d, s, e in CHUNKS],
        ["a.md", "b.md", "c.md"],
    )
    spans = [[("a.md", 95, 150), ("a.md", 50, 150), ("c.md", 0, 5)], [("b.md", 10, 20)]]
    ranked = [[("a.md", 0, 400), ("a.md", 90, 200)], [("a.md", 0, 100)]]
    codes = doc_codes(*ranked, *spans)
    traces = span_traces(
        IntervalBatch.from_rows(ranked, codes),
        IntervalBatch.from_rows(spans, codes),
        spans,
        chunks,
        1.0,
    )
    # (95, 150) lies in both retrieved chunks (first at rank 1) and is held by the 110-char
    # one; (50, 150) only by the 400-char chunk; c.md has no chunk; b.md's span is held by a
    # chunk that was not retrieved
    assert traces == [
        (SpanTrace(1, 110), SpanTrace(1, 400), SpanTrace(None, None)),
        (SpanTrace(None, 50),),
    ]
    assert traces[0][2].split and not traces[0][1].split
    # with a looser rule the 100-char chunk holds half of (50, 150): a hit
    loose = span_traces(
        IntervalBatch.from_rows(ranked, codes),
        IntervalBatch.from_rows(spans, codes),
        spans,
        chunks,
        0.5,
    )
    assert loose[0][1] == SpanTrace(1, 100)


def test_traces_round_trip_through_a_cases_row() -> None:
    result = CaseResult("q1", "factual", "tuning", True, {"mrr": 1.0}, (), 0.001)
    traced = CaseResult(**{**result.__dict__, "spans": (SpanTrace(2, 80), SpanTrace(None, None))})
    assert traced.to_json()["spans"] == [[2, 80], [None, None]]
    assert CaseResult.from_json(traced.to_json()) == traced
    assert "spans" not in result.to_json() and CaseResult.from_json(result.to_json()) == result


def _table() -> ChunkTable:
    """Four documents; chunks of ``b`` listed before ``a``'s so rows are not in doc order."""
    corpus = Corpus([Document(d, "x" * 400) for d in ("a", "b", "c", "d")], "memory")
    spans = [("b", 0, 50), ("a", 0, 100), ("a", 90, 200), ("c", 0, 400), ("a", 0, 400)]
    return ChunkTable.from_chunks(
        corpus, [make_chunk(corpus.get(d), s, e, ()) for d, s, e in spans]
    )


def test_a_chunk_table_gives_only_the_evidence_documents_rows_and_its_own_positions() -> None:
    table = _table()
    chunks = ChunkIntervals.of(table, ["a", "a", "d"])
    assert chunks.codes is table.doc_positions()  # looked up, never copied into a dict
    assert chunks.doc.tolist() == [0, 0, 0]  # a's three chunks only: b's and c's left out
    assert sorted(zip(chunks.start.tolist(), chunks.end.tolist(), strict=True)) == [
        (0, 100),
        (0, 400),
        (90, 200),
    ]
    assert chunks.holding(("a", 95, 150), 1.0) == 110 and chunks.holding(("d", 0, 5), 1.0) is None


def test_a_scored_run_over_a_chunk_table_writes_each_spans_trace() -> None:
    table = _table()
    case = GoldenCase(
        "q1", "who?", "factual", True, "tuning", (EvidenceSpan("a", 95, 150),), None, 1
    )
    ranked = [Ranked(np.array([3, 2]), np.array([0.9, 0.5], np.float32), 0.0)]
    [result] = score_cases([case], ranked, table, EvalConfig(ks=(1, 2), budgets=(500,)))
    # rank 2 (the 110-char a@90-200 after c's chunk); the shortest chunk holding it: 110
    assert result.spans == (SpanTrace(2, 110),)
    assert result.to_json()["spans"] == [[2, 110]]
