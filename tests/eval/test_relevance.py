from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from ragsweep.eval.relevance import (
    PADDING,
    Interval,
    IntervalBatch,
    chunk_hits_span,
    doc_codes,
    interval_length,
    span_hits,
    span_hits_by_rank,
)


class TestChunkHitsSpanFullContainment:
    def test_span_inside_chunk_is_a_hit(self) -> None:
        assert chunk_hits_span(("d", 0, 100), ("d", 20, 40), 1.0)

    def test_span_equal_to_chunk_is_a_hit(self) -> None:
        assert chunk_hits_span(("d", 20, 40), ("d", 20, 40), 1.0)

    def test_chunk_inside_long_span_is_a_hit(self) -> None:
        assert chunk_hits_span(("d", 50, 60), ("d", 0, 500), 1.0)

    def test_partial_overlap_is_a_miss(self) -> None:
        assert not chunk_hits_span(("d", 0, 30), ("d", 20, 40), 1.0)

    def test_one_character_short_is_a_miss(self) -> None:
        assert not chunk_hits_span(("d", 21, 100), ("d", 20, 40), 1.0)

    def test_different_doc_is_a_miss(self) -> None:
        assert not chunk_hits_span(("other", 0, 100), ("d", 20, 40), 1.0)

    def test_touching_intervals_are_a_miss(self) -> None:
        assert not chunk_hits_span(("d", 0, 20), ("d", 20, 40), 1.0)
        assert not chunk_hits_span(("d", 40, 60), ("d", 20, 40), 1.0)


class TestChunkHitsSpanHalfOverlap:
    def test_half_of_the_span_is_a_hit(self) -> None:
        assert chunk_hits_span(("d", 0, 30), ("d", 20, 40), 0.5)

    def test_less_than_half_is_a_miss(self) -> None:
        assert not chunk_hits_span(("d", 0, 29), ("d", 20, 40), 0.5)

    def test_threshold_uses_the_shorter_interval(self) -> None:
        # 5 shared characters: half of the 10-character chunk, far below half of the span.
        assert chunk_hits_span(("d", 95, 105), ("d", 100, 300), 0.5)
        assert not chunk_hits_span(("d", 94, 104), ("d", 100, 300), 0.5)

    def test_different_doc_is_still_a_miss(self) -> None:
        assert not chunk_hits_span(("other", 20, 40), ("d", 20, 40), 0.5)


def test_exact_decimal_fraction_is_a_hit() -> None:
    # 7 of the span's 50 characters with min_span_overlap 0.14: in floating point
    # 0.14 * 50 is 7.000000000000001, the ratio 7 / 50 is exactly 0.14.
    span = ("d", 100, 150)
    assert chunk_hits_span(("d", 0, 107), span, 0.14)
    assert not chunk_hits_span(("d", 0, 106), span, 0.14)


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5])
def test_rejects_min_span_overlap_outside_unit_interval(fraction: float) -> None:
    with pytest.raises(ValueError, match="min_span_overlap"):
        chunk_hits_span(("d", 0, 10), ("d", 0, 10), fraction)


@pytest.mark.parametrize("interval", [("d", 5, 5), ("d", 7, 3), ("d", -1, 4)])
def test_rejects_empty_or_negative_intervals(interval: tuple[str, int, int]) -> None:
    with pytest.raises(ValueError, match="start < end"):
        interval_length(interval)
    with pytest.raises(ValueError, match="start < end"):
        chunk_hits_span(("d", 0, 100), interval, 1.0)


def test_span_hits_by_rank_lists_every_span_hit_at_each_rank() -> None:
    spans = [("a", 10, 20), ("a", 30, 40), ("b", 0, 5)]
    ranked = [
        ("b", 100, 200),  # nothing
        ("a", 0, 50),  # both spans of doc a
        ("a", 25, 45),  # span 1 again
        ("b", 0, 50),  # span 2
        ("a", 15, 35),  # partial overlaps only
    ]
    assert span_hits_by_rank(ranked, spans, 1.0) == [
        frozenset(),
        frozenset({0, 1}),
        frozenset({1}),
        frozenset({2}),
        frozenset(),
    ]


def test_span_hits_by_rank_with_half_overlap() -> None:
    spans = [("a", 10, 20), ("a", 30, 40)]
    ranked = [("a", 15, 35)]
    assert span_hits_by_rank(ranked, spans, 0.5) == [frozenset({0, 1})]
    assert span_hits_by_rank(ranked, spans, 0.6) == [frozenset()]


def test_span_hits_by_rank_empty_ranking() -> None:
    assert span_hits_by_rank([], [("a", 0, 10)], 1.0) == []


# --- batches -------------------------------------------------------------------------------


def _rule(chunk: Interval, span: Interval, fraction: float) -> bool:
    """The hit rule written out for one pair, independently of the batch code."""
    shared = max(0, min(chunk[2], span[2]) - max(chunk[1], span[1]))
    shorter = min(chunk[2] - chunk[1], span[2] - span[1])
    return chunk[0] == span[0] and shared / shorter >= fraction


def _random_row(rng: random.Random, n: int) -> list[Interval]:
    rows = []
    for _ in range(n):
        start = rng.randrange(0, 80)
        rows.append((rng.choice(["a", "b", "c"]), start, start + rng.randint(1, 40)))
    return rows


@pytest.mark.parametrize("fraction", [1.0, 0.5, 0.14])
def test_batch_matches_the_rule_pair_by_pair(fraction: float) -> None:
    rng = random.Random(11)
    rankings = [_random_row(rng, rng.randint(0, 7)) for _ in range(200)]
    span_rows = [_random_row(rng, rng.randint(1, 4)) for _ in range(200)]
    codes = doc_codes(*rankings, *span_rows)
    hits = span_hits(
        IntervalBatch.from_rows(rankings, codes),
        IntervalBatch.from_rows(span_rows, codes),
        fraction,
    )
    assert hits.hits.shape == (200, 7, 4)
    assert hits.n_spans.tolist() == [len(s) for s in span_rows]
    for case, (ranking, spans) in enumerate(zip(rankings, span_rows, strict=True)):
        expected = [
            frozenset(j for j, span in enumerate(spans) if _rule(chunk, span, fraction))
            for chunk in ranking
        ]
        padding = [frozenset()] * (7 - len(ranking))
        assert hits.sets(case) == expected + padding, case


def test_documents_are_compared_by_code() -> None:
    codes = doc_codes([("x", 0, 10), ("a", 0, 10)], [("y", 0, 5), ("a", 0, 5)])
    ranked = IntervalBatch.from_rows([[("x", 0, 10), ("a", 0, 10)]], codes)
    spans = IntervalBatch.from_rows([[("y", 0, 5), ("a", 0, 5)]], codes)
    assert span_hits(ranked, spans, 0.5).sets(0) == [frozenset(), frozenset({1})]
    with pytest.raises(ValueError, match="document 'z' has no code"):
        IntervalBatch.from_rows([[("z", 0, 1)]], codes)


def test_take_picks_rows_from_a_chunk_table() -> None:
    codes = {"a": 0, "b": 1}
    table = IntervalBatch.from_rows([[("a", 0, 10), ("b", 5, 9), ("a", 20, 30)]], codes)
    picked = table.take(np.array([[2, 0, -1], [1, -1, -1]]))
    assert picked.doc.tolist() == [[0, 0, PADDING], [1, PADDING, PADDING]]
    assert picked.start.tolist() == [[20, 0, 0], [5, 0, 0]]
    assert picked.end.tolist() == [[30, 10, 0], [9, 0, 0]]
    assert picked.present.tolist() == [[True, True, False], [True, False, False]]


def test_batches_must_have_the_same_rows() -> None:
    one = IntervalBatch.from_rows([[("a", 0, 1)]], {"a": 0})
    two = IntervalBatch.from_rows([[("a", 0, 1)], [("a", 0, 1)]], {"a": 0})
    with pytest.raises(ValueError, match="1 rankings but 2 span rows"):
        span_hits(one, two, 1.0)


def test_from_rows_rejects_an_empty_interval() -> None:
    with pytest.raises(ValueError, match="start < end"):
        IntervalBatch.from_rows([[("a", 3, 3)]], {"a": 0})


def from_columns(intervals: list[tuple[str, Any, Any]], codes: dict[str, int]) -> IntervalBatch:
    """:meth:`IntervalBatch.from_columns` of ``intervals`` cut into their three columns."""
    docs, starts, ends = ([i[k] for i in intervals] for k in range(3))
    return IntervalBatch.from_columns(docs, starts, ends, codes)


def test_one_row_packed_as_arrays_equals_the_row_packed_interval_by_interval() -> None:
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(6)]
    intervals = [(rng.choice(docs), s, s + rng.randint(1, 9)) for s in range(0, 300, 3)]
    codes = doc_codes(intervals)
    fast, slow = (
        from_columns(intervals, codes),
        IntervalBatch.from_rows([intervals], codes),
    )
    for column in ("doc", "start", "end"):
        assert np.array_equal(getattr(fast, column), getattr(slow, column))
        assert getattr(fast, column).dtype == np.int64
    empty = from_columns([], {})
    assert empty.doc.shape == IntervalBatch.from_rows([[]], {}).doc.shape
    for bad in (
        [*intervals, ("d1", 5, 5)],
        [("d0", -1, 3)],
        [("elsewhere", 0, 3)],
        [("d0", -0.5, 3)],
    ):
        with pytest.raises(ValueError) as fast_error:
            from_columns(bad, codes)
        with pytest.raises(ValueError) as slow_error:
            IntervalBatch.from_rows([bad], codes)
        assert str(fast_error.value) == str(slow_error.value)


def test_coded_intervals_equal_intervals_packed_by_their_codes() -> None:
    rng = random.Random(11)
    docs = [f"d{i}" for i in range(6)]
    intervals = [(rng.choice(docs), s, s + rng.randint(1, 9)) for s in range(0, 300, 3)]
    codes = {doc: 10 + i for i, doc in enumerate(docs)}  # any codes, not first-seen ones
    coded = IntervalBatch.from_coded(
        np.array([codes[d] for d, _, _ in intervals]),
        np.array([s for _, s, _ in intervals]),
        np.array([e for _, _, e in intervals]),
    )
    packed = IntervalBatch.from_rows([intervals], codes)
    columns = IntervalBatch.from_columns(*zip(*intervals, strict=True), codes)  # type: ignore[call-arg]
    for column in ("doc", "start", "end"):
        assert np.array_equal(getattr(coded, column), getattr(packed, column))
        assert np.array_equal(getattr(columns, column), getattr(packed, column))
    empty = IntervalBatch.from_coded(np.empty(0), np.empty(0), np.empty(0))
    assert empty.take(np.array([[-1, -1]])).present.tolist() == [[False, False]]
    for doc, start, end, message in (
        (0, 5, 5, "start < end"),
        (0, -1, 3, "start < end"),
        (-1, 0, 3, "negative"),
    ):
        with pytest.raises(ValueError, match=message):
            IntervalBatch.from_coded(np.array([0, doc]), np.array([0, start]), np.array([1, end]))
    with pytest.raises(ValueError, match="different lengths"):
        IntervalBatch.from_coded(np.array([0, 1]), np.array([0]), np.array([1]))


def test_document_codes_follow_first_appearance_across_lists() -> None:
    assert doc_codes([("b", 0, 1), ("a", 0, 1), ("b", 2, 3)], [("c", 0, 1), ("a", 1, 2)]) == {
        "b": 0,
        "a": 1,
        "c": 2,
    }
    assert doc_codes() == {}
