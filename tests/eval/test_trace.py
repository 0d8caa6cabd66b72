"""Span traces: the rank of each evidence span's first hit and the chunk holding it."""

from __future__ import annotations

from ragsweep.chunk.chunkers import Chunk
from ragsweep.eval.relevance import IntervalBatch, doc_codes
from ragsweep.eval.scoring import CaseResult
from ragsweep.eval.trace import ChunkIntervals, SpanTrace, span_traces

CHUNKS = [("b.md", 0, 50), ("a.md", 0, 100), ("a.md", 90, 200), ("a.md", 0, 400)]


def test_rank_and_the_shortest_chunk_that_holds_each_span() -> None:
    chunks = ChunkIntervals.of(
        [Chunk(f"{d}@{s}-{e}", d, s, e, "x" * (e - s), ()) for d, s, e in CHUNKS]
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
