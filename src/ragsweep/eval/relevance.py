"""When a retrieved chunk counts as finding an evidence span.

Both chunks and evidence spans are ``(doc, start, end)`` intervals: ``doc`` is a document id,
``start``/``end`` are 0-based, end-exclusive character offsets (characters are Python code
points) into that document's text. The caller converts its own objects to tuples, so this
module depends on nothing else in ragsweep.

A run scores thousands of cases, so the rule is applied to whole batches at once:
:class:`IntervalBatch` holds one row of intervals per case and :func:`span_hits` gives, for
every case, rank and span, whether that rank's chunk hits that span.
:func:`chunk_hits_span` and :func:`span_hits_by_rank` are the same computation on a batch of
one, for reading a single case (tests and interactive checks use them; runs do not).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

Interval = tuple[str, int, int]
"""``(doc, start, end)``: a character range of one document, end exclusive."""

PADDING = -1
"""Document code of an empty slot in an :class:`IntervalBatch` row."""


@dataclass(frozen=True)
class IntervalBatch:
    """Intervals of many cases, one row per case, padded to a common width.

    ``doc`` holds integer document codes (the same code means the same document across
    every batch built with one ``codes`` mapping) and :data:`PADDING` in empty slots;
    ``start``/``end`` are character offsets (0 in empty slots). All three are int64
    arrays of shape ``(n_cases, width)``. Rows keep their order: slot 0 is rank 1 for a
    ranking.
    """

    doc: np.ndarray
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def from_rows(
        cls, rows: Sequence[Sequence[Interval]], codes: Mapping[str, int], width: int = 1
    ) -> IntervalBatch:
        """Pack ``rows`` (one sequence of intervals per case) into arrays at least ``width``
        wide. ``codes`` maps document ids to codes (see :func:`doc_codes`). Raises
        ValueError for an id missing from ``codes`` and for an empty or negative interval
        (see :func:`interval_length`)."""
        width = max([width, *(len(row) for row in rows)])
        doc = np.full((len(rows), width), PADDING, dtype=np.int64)
        start = np.zeros((len(rows), width), dtype=np.int64)
        end = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            for j, interval in enumerate(row):
                interval_length(interval)
                if interval[0] not in codes:
                    raise ValueError(f"document {interval[0]!r} has no code")
                doc[i, j] = codes[interval[0]]
                start[i, j], end[i, j] = interval[1], interval[2]
        return cls(doc, start, end)

    @classmethod
    def from_columns(
        cls,
        docs: Sequence[str],
        starts: Sequence[int],
        ends: Sequence[int],
        codes: Mapping[str, int],
    ) -> IntervalBatch:
        """``from_rows([intervals], codes)`` of the intervals ``(docs[i], starts[i],
        ends[i])``, given as three columns (no tuple per interval is made) and checked and
        packed as whole arrays: a run's retrieved chunks are thousands of intervals. The
        same errors: a bad interval is reported by :meth:`from_rows`."""
        start, end = np.asarray(starts), np.asarray(ends)
        if (
            not len(docs)
            or not len(docs) == len(starts) == len(ends)
            or start.dtype.kind not in "iu"
            or end.dtype.kind not in "iu"
            or not ((start >= 0) & (start < end)).all()
            or not codes.keys() >= set(docs)
        ):
            return cls.from_rows([list(zip(docs, starts, ends, strict=True))], codes)
        start, end = start.astype(np.int64), end.astype(np.int64)
        doc = np.fromiter(map(codes.__getitem__, docs), dtype=np.int64, count=len(docs))
        return cls(doc[np.newaxis], start[np.newaxis], end[np.newaxis])

    @classmethod
    def from_coded(cls, doc: np.ndarray, start: np.ndarray, end: np.ndarray) -> IntervalBatch:
        """One row of intervals whose documents are codes already (``doc[i]``, an int
        >= 0), e.g. a chunk table's corpus positions. ValueError for a negative code, and
        for an empty or negative interval (as :func:`interval_length`)."""
        doc, start, end = (np.asarray(a, dtype=np.int64).reshape(-1) for a in (doc, start, end))
        if not len(doc) == len(start) == len(end):
            raise ValueError("interval columns of different lengths")
        if not len(doc):
            return cls.from_rows([[]], {})  # one empty slot, as an empty row packs
        if doc.min() < 0:
            raise ValueError(f"document code {int(doc.min())} is negative")
        bad = np.flatnonzero((start < 0) | (start >= end))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"interval ({int(start[i])}, {int(end[i])}) of document code {int(doc[i])} "
                "must satisfy 0 <= start < end"
            )
        return cls(doc[np.newaxis], start[np.newaxis], end[np.newaxis])

    def take(self, indices: np.ndarray) -> IntervalBatch:
        """Rows of intervals picked from this batch's only row (e.g. every chunk of an
        index). ``indices`` is an int array ``(n_cases, width)`` of positions in that row,
        ``-1`` for an empty slot (a ranking shorter than ``width``)."""
        if self.doc.shape[0] != 1:
            raise ValueError("take() picks from a batch of exactly one row")
        present = indices >= 0
        safe = np.where(present, indices, 0)
        return IntervalBatch(
            np.where(present, self.doc[0, safe], PADDING),
            np.where(present, self.start[0, safe], 0),
            np.where(present, self.end[0, safe], 0),
        )

    @property
    def present(self) -> np.ndarray:
        """Boolean ``(n_cases, width)``: True where a slot holds an interval."""
        return self.doc != PADDING

    @property
    def width(self) -> int:
        return int(self.doc.shape[1])


def interval_length(interval: Interval) -> int:
    """Length in characters of a ``(doc, start, end)`` interval.

    Raises ValueError unless ``0 <= start < end``: an empty span would be hit by any chunk.
    """
    doc, start, end = interval
    if not 0 <= start < end:
        raise ValueError(f"interval {interval!r} of document {doc!r} must satisfy 0 <= start < end")
    return end - start


@dataclass(frozen=True)
class SpanHits:
    """For a batch of cases: which evidence spans each retrieved chunk hits.

    ``hits[c, r, s]`` is True when the chunk at rank ``r + 1`` of case ``c`` hits evidence
    span ``s`` of that case (shape ``(n_cases, depth, max_spans)``). Ranks past a case's
    retrieved list and span slots past ``n_spans[c]`` are False. Every span a chunk hits is
    marked, including spans already hit at a higher rank; deduplication is left to the
    metrics. ``n_spans`` (int, shape ``(n_cases,)``) is each case's number of spans.
    """

    hits: np.ndarray
    n_spans: np.ndarray

    @classmethod
    def from_sets(
        cls, rankings: Sequence[Sequence[frozenset[int]]], n_spans: Sequence[int]
    ) -> SpanHits:
        """Build from per-rank sets of span indices, one list per case (rank 1 first).

        Raises ValueError for a span index outside ``range(n_spans)`` of its case.
        """
        depth = max([1, *(len(r) for r in rankings)])
        width = max([1, *n_spans])
        hits = np.zeros((len(rankings), depth, width), dtype=bool)
        for c, (ranking, n) in enumerate(zip(rankings, n_spans, strict=True)):
            for r, spans_hit in enumerate(ranking):
                if any(not 0 <= s < n for s in spans_hit):
                    raise ValueError(
                        f"span indices {sorted(spans_hit)} out of range for n_spans={n}"
                    )
                hits[c, r, list(spans_hit)] = True
        return cls(hits, np.asarray(n_spans, dtype=np.int64))

    def sets(self, case: int) -> list[frozenset[int]]:
        """Case ``case``'s hits as one set of span indices per rank (all ``depth`` ranks)."""
        return [frozenset(np.flatnonzero(row).tolist()) for row in self.hits[case]]


def span_hits(ranked: IntervalBatch, spans: IntervalBatch, min_span_overlap: float) -> SpanHits:
    """Apply the hit rule to every (rank, span) pair of every case.

    A chunk hits a span when both come from the same document and they share at least
    ``min_span_overlap`` times the length of the shorter of the two. With the default 1.0
    the shorter one lies fully inside the other: the span inside the chunk, or the chunk
    inside a long span. ``ranked`` and ``spans`` must have the same number of rows and be
    built with the same document codes.

    Raises ValueError for a ``min_span_overlap`` outside (0, 1] or a row count mismatch.
    """
    _check_min_span_overlap(min_span_overlap)
    if ranked.doc.shape[0] != spans.doc.shape[0]:
        raise ValueError(f"{ranked.doc.shape[0]} rankings but {spans.doc.shape[0]} span rows")
    chunk = _expand(ranked, axis=2)
    span = _expand(spans, axis=1)
    shared = np.maximum(0, np.minimum(chunk[2], span[2]) - np.maximum(chunk[1], span[1]))
    shorter = np.minimum(chunk[2] - chunk[1], span[2] - span[1])
    same_doc = (chunk[0] == span[0]) & (chunk[0] != PADDING)
    # The ratio, not ``shared >= fraction * shorter``: int64 / int64 is correctly rounded
    # (as Python's int / int), so an exact fraction such as 7/50 equals a configured 0.14,
    # whereas 0.14 * 50 == 7.000000000000001 would turn an exact match into a miss.
    ratio = shared / np.maximum(shorter, 1)
    hits = same_doc & (ratio >= min_span_overlap)
    return SpanHits(hits, spans.present.sum(axis=1))


def _expand(batch: IntervalBatch, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.expand_dims(batch.doc, axis),
        np.expand_dims(batch.start, axis),
        np.expand_dims(batch.end, axis),
    )


def doc_codes(*interval_lists: Sequence[Interval]) -> dict[str, int]:
    """Codes for every document id in the given intervals (0, 1, ... in first-seen order)."""
    return codes_of(
        itertools.chain.from_iterable(map(_DOC, intervals) for intervals in interval_lists)
    )


def codes_of(docs: Iterable[str]) -> dict[str, int]:
    """Codes for the document ids ``docs`` (0, 1, ... in first-seen order)."""
    first_seen = dict.fromkeys(docs)  # in C: a run codes thousands of chunks
    return dict(zip(first_seen, range(len(first_seen)), strict=True))


_DOC = operator.itemgetter(0)


def chunk_hits_span(chunk: Interval, span: Interval, min_span_overlap: float) -> bool:
    """True if ``chunk`` finds the evidence ``span`` (the rule of :func:`span_hits`).

    Raises ValueError for an empty interval or a ``min_span_overlap`` outside (0, 1].
    """
    return bool(span_hits_by_rank([chunk], [span], min_span_overlap)[0])


def span_hits_by_rank(
    ranked: Sequence[Interval], spans: Sequence[Interval], min_span_overlap: float
) -> list[frozenset[int]]:
    """For one case: for each retrieved chunk (rank 1 first), the indices into ``spans``
    that it hits (see :func:`span_hits`)."""
    codes = doc_codes(ranked, spans)
    hits = span_hits(
        IntervalBatch.from_rows([ranked], codes),
        IntervalBatch.from_rows([spans], codes),
        min_span_overlap,
    )
    return hits.sets(0)[: len(ranked)]


def _check_min_span_overlap(min_span_overlap: float) -> None:
    if not 0.0 < min_span_overlap <= 1.0:
        raise ValueError(f"min_span_overlap={min_span_overlap} must be in (0, 1]")
