"""Per-query retrieval metrics over evidence spans, and their averaging.

Each metric is one small function that computes its value for every case of a batch at once
and returns a per-case array (shape ``(n_cases,)``, float64). Averaging over cases is a
separate step (:func:`mean_by_key`). The rank-based metrics take a
:class:`~ragsweep.eval.relevance.SpanHits`: for each case, rank and evidence span, whether that
rank's chunk hits that span. A span hit at several ranks counts once, at its first rank.
Ranks past the end of a case's retrieved list count as misses. Every case must have at least
one evidence span. The exact definitions are in docs/metrics.md.

Metrics at a context budget (``*_at_budget``) are the same rules applied to the chunks a
:class:`~ragsweep.eval.budget.Packing` packed into the budget (a prefix of each ranking), plus
what the packing used. Names and meanings of every metric are in :mod:`ragsweep.eval.measures`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ragsweep.eval.budget import Packing, pack, packed_intervals, prefix_union_lengths
from ragsweep.eval.measures import (
    CHARS_USED,
    CHUNKS_USED,
    COVERAGE,
    HIT,
    MRR,
    NDCG,
    RAN_OUT,
    RECALL,
    Measure,
)
from ragsweep.eval.relevance import (
    PADDING,
    Interval,
    IntervalBatch,
    SpanHits,
    doc_codes,
    span_hits,
)


def hit_at_k(h: SpanHits, k: int) -> np.ndarray:
    """Per case, 1.0 if any of the top ``k`` chunks hits any evidence span, else 0.0
    (Success@k)."""
    _check_cutoff(h, k)
    return np.any(h.hits[:, :k], axis=(1, 2)).astype(np.float64)


def recall_at_k(h: SpanHits, k: int) -> np.ndarray:
    """Per case, the fraction of its ``n_spans`` evidence spans hit within the top ``k``."""
    _check_cutoff(h, k)
    return h.hits[:, :k].any(axis=1).sum(axis=1) / h.n_spans


def ndcg_at_k(h: SpanHits, k: int) -> np.ndarray:
    """Per case, binary nDCG@k with per-span deduplication.

    Rank i (1-based) has gain 1 if its chunk hits at least one span not hit at a rank above
    it, else 0; DCG = sum of gain_i / log2(i + 1). The ideal DCG places one new span at each
    of the first min(n_spans, k) ranks.
    """
    _check_cutoff(h, k)
    top = h.hits[:, :k]
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    # Both sums add rank by rank (cumsum), so a perfect ranking is exactly 1.0: numpy's
    # pairwise sum() adds in another order from 8 terms on and can land 1 ulp above.
    dcg = np.cumsum(_first_hit_ranks(top) * discounts[: top.shape[1]], axis=1)[:, -1]
    ideal = np.cumsum(discounts)[np.minimum(h.n_spans, k) - 1]
    return dcg / ideal


def reciprocal_rank(h: SpanHits) -> np.ndarray:
    """Per case, 1 / rank of the first chunk hitting any span, over the whole retrieved
    list; 0.0 if none does."""
    _check_n_spans(h)
    any_span = h.hits.any(axis=2)
    first = any_span.argmax(axis=1)
    return np.where(np.any(any_span, axis=1), 1.0 / (first + 1), 0.0)


def coverage_at_k(ranked: IntervalBatch, evidence: IntervalBatch, k: int) -> np.ndarray:
    """Per case, the fraction of evidence characters covered by the top ``k`` chunks.

    ``evidence`` must be the union of each case's spans per document, as sorted disjoint
    intervals (:func:`evidence_union`), so overlapping spans count once; overlapping chunks
    likewise cover a character once. Raises ValueError for a case without evidence.
    """
    _check_k(k)
    total = np.where(evidence.present, evidence.end - evidence.start, 0).sum(axis=1)
    if (total == 0).any():
        raise ValueError("coverage needs at least one evidence span per case")
    _check_disjoint(evidence)
    return _covered_chars(ranked, evidence, k) / total


def _check_disjoint(evidence: IntervalBatch) -> None:
    """Raise ValueError if two intervals of a row share a character: the evidence must be
    the spans' union (:func:`evidence_union`), or overlapping spans would count twice."""
    doc, start, end = evidence.doc, evidence.start, evidence.end
    same_doc = (doc[:, :, None] == doc[:, None, :]) & (doc[:, :, None] != PADDING)
    shared = np.minimum(end[:, :, None], end[:, None, :]) - np.maximum(
        start[:, :, None], start[:, None, :]
    )
    off_diagonal = ~np.eye(evidence.width, dtype=bool)
    if (same_doc & (shared > 0) & off_diagonal).any():
        raise ValueError("evidence intervals overlap: pass the spans' evidence_union")


def _covered_chars(ranked: IntervalBatch, evidence: IntervalBatch, k: int) -> np.ndarray:
    """Per case, characters of ``evidence`` inside the union of the top ``k`` chunks.

    Each chunk is clipped to each evidence interval (shape ``(cases, evidence, k)``); the
    clipped pieces are sorted by start and swept left to right, each adding what lies past
    the furthest end seen so far. Pieces that miss become empty intervals at the evidence
    start, which add nothing.
    """
    e_start, e_end = evidence.start[:, :, None], evidence.end[:, :, None]
    c_start, c_end = ranked.start[:, None, :k], ranked.end[:, None, :k]
    lo, hi = np.maximum(c_start, e_start), np.minimum(c_end, e_end)
    same_doc = (ranked.doc[:, None, :k] == evidence.doc[:, :, None]) & (
        evidence.doc[:, :, None] != PADDING
    )
    piece = same_doc & (hi > lo)
    lo, hi = np.where(piece, lo, e_start), np.where(piece, hi, e_start)
    order = np.argsort(lo, axis=2, kind="stable")
    lo, hi = np.take_along_axis(lo, order, 2), np.take_along_axis(hi, order, 2)
    furthest = np.maximum.accumulate(hi, axis=2)
    before = np.concatenate([e_start, furthest[:, :, :-1]], axis=2)
    return np.maximum(0, hi - np.maximum(lo, before)).sum(axis=(1, 2))


def _first_hit_ranks(top: np.ndarray) -> np.ndarray:
    """Boolean ``(cases, ranks)``: True at the ranks where some span is hit for the first
    time (the ranks that gain in nDCG)."""
    gains = np.zeros(top.shape[:2], dtype=bool)
    hit = top.any(axis=1)
    cases, spans = np.nonzero(hit)
    gains[cases, top.argmax(axis=1)[cases, spans]] = True
    return gains


def evidence_union(rows: Sequence[Sequence[Interval]]) -> list[list[Interval]]:
    """Per case, the union of its spans per document as sorted, disjoint intervals."""
    return [_union(row) for row in rows]


def _union(intervals: Sequence[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for doc, start, end in sorted(intervals):
        if merged and merged[-1][0] == doc and start <= merged[-1][2]:
            merged[-1] = (doc, merged[-1][1], max(merged[-1][2], end))
        else:
            merged.append((doc, start, end))
    return merged


def hit_at_budget(h: SpanHits, packing: Packing) -> np.ndarray:
    """Per case, 1.0 if any chunk packed into the budget hits any evidence span, else 0.0."""
    return hit_at_k(_packed_hits(h, packing), h.hits.shape[1])


def recall_at_budget(h: SpanHits, packing: Packing) -> np.ndarray:
    """Per case, the fraction of its evidence spans hit by the chunks packed into the
    budget."""
    return recall_at_k(_packed_hits(h, packing), h.hits.shape[1])


def coverage_at_budget(
    ranked: IntervalBatch, evidence: IntervalBatch, packing: Packing
) -> np.ndarray:
    """Per case, the fraction of evidence characters inside the union of the chunks packed
    into the budget (``evidence`` as for :func:`coverage_at_k`)."""
    return coverage_at_k(packed_intervals(ranked, packing), evidence, ranked.width)


def chunks_used_at_budget(packing: Packing) -> np.ndarray:
    """Per case, the number of chunks packed into the budget."""
    return packing.n_packed.astype(np.float64)


def chars_used_at_budget(packing: Packing) -> np.ndarray:
    """Per case, the characters of chunk text packed into the budget (overlap counted
    once; at most the budget)."""
    return packing.chars.astype(np.float64)


def ran_out_at_budget(packing: Packing) -> np.ndarray:
    """Per case, 1.0 if the ranking ended before the budget was filled (no chunk was
    refused), else 0.0."""
    return packing.ran_out.astype(np.float64)


def _packed_hits(h: SpanHits, packing: Packing) -> SpanHits:
    """``h`` with the ranks that were not packed turned into misses."""
    return SpanHits(h.hits & packing.ranks(h.hits.shape[1])[:, :, None], h.n_spans)


def _budget_metrics(
    h: SpanHits, ranked: IntervalBatch, evidence: IntervalBatch, budgets: Sequence[int]
) -> dict[str, np.ndarray]:
    """The budget half of :func:`metrics_per_case`: one packing per budget, each from the
    same prefix-union lengths."""
    union = prefix_union_lengths(ranked)
    values: dict[str, np.ndarray] = {}
    for budget in budgets:
        packing = pack(ranked, union, budget)
        values[Measure(HIT, budget=budget).name] = hit_at_budget(h, packing)
        values[Measure(RECALL, budget=budget).name] = recall_at_budget(h, packing)
        values[Measure(COVERAGE, budget=budget).name] = coverage_at_budget(
            ranked, evidence, packing
        )
        values[Measure(CHUNKS_USED, budget=budget).name] = chunks_used_at_budget(packing)
        values[Measure(CHARS_USED, budget=budget).name] = chars_used_at_budget(packing)
        values[Measure(RAN_OUT, budget=budget).name] = ran_out_at_budget(packing)
    return values


def metrics_per_case(
    ranked: IntervalBatch,
    spans: IntervalBatch,
    evidence: IntervalBatch,
    ks: Sequence[int],
    min_span_overlap: float,
    budgets: Sequence[int] = (),
) -> dict[str, np.ndarray]:
    """Every metric for a batch of answerable cases, as per-case arrays keyed by measure
    name (:func:`ragsweep.eval.measures.computed`).

    For each k in ``ks``: hit, recall, nDCG and coverage at k; ``mrr`` (each case's
    reciprocal rank); for each budget in ``budgets`` (characters): hit, recall and coverage
    of the chunks packed into it, and the chunks, characters used and whether the ranking
    ran out. ``ranked`` holds the retrieved chunks (rank 1 first), ``spans`` the evidence
    spans and ``evidence`` their union (:func:`evidence_union`), all with the same rows and
    document codes.
    """
    h = span_hits(ranked, spans, min_span_overlap)
    values: dict[str, np.ndarray] = {}
    for k in ks:
        values[Measure(HIT, k=k).name] = hit_at_k(h, k)
        values[Measure(RECALL, k=k).name] = recall_at_k(h, k)
        values[Measure(NDCG, k=k).name] = ndcg_at_k(h, k)
        values[Measure(COVERAGE, k=k).name] = coverage_at_k(ranked, evidence, k)
    values[Measure(MRR).name] = reciprocal_rank(h)
    if budgets:
        values.update(_budget_metrics(h, ranked, evidence, budgets))
    return values


def case_metrics(
    ranked: Sequence[Interval],
    spans: Sequence[Interval],
    ks: Sequence[int],
    min_span_overlap: float,
    budgets: Sequence[int] = (),
) -> dict[str, float]:
    """:func:`metrics_per_case` for one case given as plain intervals.

    ``ranked`` are the retrieved chunks, rank 1 first (fewer than k is fine); ``spans`` are
    the case's evidence spans and must be non-empty: unanswerable cases get no retrieval
    metrics at all, which the caller handles.
    """
    if not spans:
        raise ValueError(
            "case_metrics needs at least one evidence span; unanswerable cases get no "
            "retrieval metrics"
        )
    codes = doc_codes(ranked, spans)
    values = metrics_per_case(
        IntervalBatch.from_rows([ranked], codes),
        IntervalBatch.from_rows([spans], codes),
        IntervalBatch.from_rows(evidence_union([spans]), codes),
        ks,
        min_span_overlap,
        budgets,
    )
    return {name: float(array[0]) for name, array in values.items()}


def coverage_of(ranked: Sequence[Interval], spans: Sequence[Interval]) -> float:
    """Fraction of the evidence characters of ``spans`` inside the union of all of
    ``ranked`` (coverage at the full depth of one ranking)."""
    if not spans:
        raise ValueError("coverage needs at least one evidence span")
    codes = doc_codes(ranked, spans)
    batch = IntervalBatch.from_rows([ranked], codes)
    evidence = IntervalBatch.from_rows(evidence_union([spans]), codes)
    return float(coverage_at_k(batch, evidence, batch.width)[0])


def mean_by_key(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Arithmetic mean of each key over ``rows``; every row must have the same keys.

    Empty input gives an empty dict.
    """
    if not rows:
        return {}
    keys = list(rows[0])
    expected = set(keys)
    for index, row in enumerate(rows):
        if row.keys() != expected:
            raise ValueError(
                f"row {index} has keys {sorted(row)}, expected the keys of row 0: {sorted(keys)}"
            )
    return {key: math.fsum(row[key] for row in rows) / len(rows) for key in keys}


def _check_cutoff(h: SpanHits, k: int) -> None:
    _check_n_spans(h)
    _check_k(k)


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"cut-off k={k} must be >= 1")


def _check_n_spans(h: SpanHits) -> None:
    if h.n_spans.size and h.n_spans.min() < 1:
        raise ValueError(
            f"n_spans={int(h.n_spans.min())}: retrieval metrics need at least one evidence "
            "span; unanswerable cases get none"
        )
