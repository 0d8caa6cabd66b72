"""Per-query retrieval metrics over evidence spans, and their averaging.

Each metric is one small function computing the value for a single query (case). Averaging
over cases is a separate step (:func:`mean_by_key`). The rank-based metrics take ``hits``, the
output of :func:`ragsweep.relevance.span_hits_by_rank`: for each retrieved chunk, rank 1
first, the indices of the evidence spans it hits; ``n_spans`` is the number of evidence spans
of the case (at least 1). A span hit at several ranks counts once, at its first rank. Ranks
past the end of the retrieved list count as misses. The exact definitions are in
docs/metrics.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from ragsweep.relevance import Interval, interval_length, overlap_chars, span_hits_by_rank

METRIC_DEFINITIONS: dict[str, str] = {
    "hit_at_k": (
        "1 if at least one of the top k chunks hits an evidence span, else 0 "
        "(Success@k); averaged, the fraction of cases with any evidence in the top k."
    ),
    "recall_at_k": (
        "Fraction of the case's evidence spans hit by at least one of the top k chunks "
        "(TREC recall@k)."
    ),
    "ndcg_at_k": (
        "Binary nDCG@k: a rank gains 1 if its chunk hits an evidence span not hit above it, "
        "discounted by log2(rank + 1) and normalised by the ideal ranking of "
        "min(n_spans, k) hits."
    ),
    "mrr": (
        "Reciprocal rank of the first retrieved chunk that hits any evidence span "
        "(0 if none does), averaged over cases."
    ),
    "coverage_at_k": (
        "Fraction of the evidence characters (union of the spans per document) that lie "
        "inside the union of the top k chunks."
    ),
}


def hit_at_k(hits: Sequence[frozenset[int]], n_spans: int, k: int) -> float:
    """1.0 if any of the top ``k`` chunks hits any evidence span, else 0.0 (Success@k)."""
    _check_cutoff(n_spans, k)
    return 1.0 if any(hits[:k]) else 0.0


def recall_at_k(hits: Sequence[frozenset[int]], n_spans: int, k: int) -> float:
    """Fraction of the ``n_spans`` evidence spans hit within the top ``k`` chunks."""
    _check_cutoff(n_spans, k)
    return len(_spans_hit(hits[:k], n_spans)) / n_spans


def ndcg_at_k(hits: Sequence[frozenset[int]], n_spans: int, k: int) -> float:
    """Binary nDCG@k with per-span deduplication.

    Rank i (1-based) has gain 1 if its chunk hits at least one span not hit at a rank above
    it, else 0; DCG = sum of gain_i / log2(i + 1). The ideal DCG places one new span at each
    of the first min(n_spans, k) ranks.
    """
    _check_cutoff(n_spans, k)
    dcg = sum(_discount(rank) for rank in _ranks_with_new_spans(hits[:k], n_spans))
    ideal = sum(_discount(rank) for rank in range(1, min(n_spans, k) + 1))
    return dcg / ideal


def reciprocal_rank(hits: Sequence[frozenset[int]], n_spans: int) -> float:
    """1 / rank of the first chunk hitting any span, over the whole list; 0.0 if none does."""
    _check_n_spans(n_spans)
    for rank, spans_hit in enumerate(hits, start=1):
        if spans_hit:
            _check_span_indices(spans_hit, n_spans)
            return 1.0 / rank
    return 0.0


def coverage_at_k(ranked: Sequence[Interval], spans: Sequence[Interval], k: int) -> float:
    """Fraction of evidence characters covered by the top ``k`` chunks.

    Evidence characters are the union of the spans' character intervals per document, so
    overlapping spans are not counted twice; likewise overlapping chunks cover a character
    once. Both are ``(doc, start, end)`` tuples with end-exclusive character offsets.
    """
    if not spans:
        raise ValueError("coverage needs at least one evidence span")
    _check_k(k)
    return _covered_fraction(_union_by_doc(spans), ranked[:k])


def _covered_fraction(
    evidence: dict[str, list[tuple[int, int]]], chunks: Sequence[Interval]
) -> float:
    """Fraction of the evidence union's characters inside the union of ``chunks``."""
    retrieved = _union_by_doc(chunks)
    covered = sum(
        _intersection_length(intervals, retrieved.get(doc, []))
        for doc, intervals in evidence.items()
    )
    return covered / sum(_total_length(intervals) for intervals in evidence.values())


def case_metrics(
    ranked: Sequence[Interval],
    spans: Sequence[Interval],
    ks: Sequence[int],
    min_span_overlap: float,
) -> dict[str, float]:
    """All metrics of one case: ``hit_at_{k}``, ``recall_at_{k}``, ``ndcg_at_{k}``,
    ``coverage_at_{k}`` for each k in ``ks``, and ``mrr`` (this case's reciprocal rank).

    ``ranked`` are the retrieved chunks, rank 1 first (fewer than k is fine); ``spans`` are
    the case's evidence spans and must be non-empty: unanswerable cases get no retrieval
    metrics at all, which the caller handles.
    """
    if not spans:
        raise ValueError(
            "case_metrics needs at least one evidence span; unanswerable cases get no "
            "retrieval metrics"
        )
    hits = span_hits_by_rank(ranked, spans, min_span_overlap)
    n_spans = len(spans)
    evidence = _union_by_doc(spans)  # shared by every cut-off's coverage
    values: dict[str, float] = {}
    for k in ks:
        _check_k(k)
        values[f"hit_at_{k}"] = hit_at_k(hits, n_spans, k)
        values[f"recall_at_{k}"] = recall_at_k(hits, n_spans, k)
        values[f"ndcg_at_{k}"] = ndcg_at_k(hits, n_spans, k)
        values[f"coverage_at_{k}"] = _covered_fraction(evidence, ranked[:k])
    values["mrr"] = reciprocal_rank(hits, n_spans)
    return values


def mean_by_key(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Arithmetic mean of each key over ``rows``; every row must have the same keys.

    Empty input gives an empty dict.
    """
    if not rows:
        return {}
    keys = list(rows[0])
    for index, row in enumerate(rows):
        if set(row) != set(keys):
            raise ValueError(
                f"row {index} has keys {sorted(row)}, expected the keys of row 0: {sorted(keys)}"
            )
    return {key: math.fsum(row[key] for row in rows) / len(rows) for key in keys}


def _spans_hit(hits: Iterable[frozenset[int]], n_spans: int) -> set[int]:
    union: set[int] = set()
    for spans_hit in hits:
        _check_span_indices(spans_hit, n_spans)
        union |= spans_hit
    return union


def _ranks_with_new_spans(hits: Sequence[frozenset[int]], n_spans: int) -> list[int]:
    """1-based ranks whose chunk hits at least one span not hit at a higher rank."""
    seen: set[int] = set()
    ranks: list[int] = []
    for rank, spans_hit in enumerate(hits, start=1):
        _check_span_indices(spans_hit, n_spans)
        if spans_hit - seen:
            ranks.append(rank)
        seen |= spans_hit
    return ranks


def _discount(rank: int) -> float:
    return 1.0 / math.log2(rank + 1)


def _union_by_doc(intervals: Iterable[Interval]) -> dict[str, list[tuple[int, int]]]:
    """Per document, the union of the intervals as sorted, disjoint ``(start, end)`` pairs."""
    by_doc: dict[str, list[tuple[int, int]]] = {}
    for interval in intervals:
        interval_length(interval)  # rejects empty or negative intervals
        doc, start, end = interval
        by_doc.setdefault(doc, []).append((start, end))
    return {doc: _merge(pairs) for doc, pairs in by_doc.items()}


def _merge(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(pairs):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _intersection_length(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Characters shared by two unions of disjoint intervals."""
    return sum(
        overlap_chars(a_start, a_end, b_start, b_end)
        for a_start, a_end in a
        for b_start, b_end in b
    )


def _total_length(pairs: list[tuple[int, int]]) -> int:
    return sum(end - start for start, end in pairs)


def _check_cutoff(n_spans: int, k: int) -> None:
    _check_n_spans(n_spans)
    _check_k(k)


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"cut-off k={k} must be >= 1")


def _check_n_spans(n_spans: int) -> None:
    if n_spans < 1:
        raise ValueError(
            f"n_spans={n_spans}: retrieval metrics need at least one evidence span; "
            "unanswerable cases get none"
        )


def _check_span_indices(spans_hit: frozenset[int], n_spans: int) -> None:
    if any(not 0 <= index < n_spans for index in spans_hit):
        raise ValueError(f"span indices {sorted(spans_hit)} out of range for n_spans={n_spans}")
