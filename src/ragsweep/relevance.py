"""When a retrieved chunk counts as finding an evidence span.

Both chunks and evidence spans are plain ``(doc, start, end)`` tuples: ``doc`` is a document
id, ``start``/``end`` are 0-based, end-exclusive character offsets (characters are Python code
points) into that document's text. The caller converts its own objects to tuples, so this
module depends on nothing else in ragsweep.
"""

from __future__ import annotations

from collections.abc import Sequence

Interval = tuple[str, int, int]
"""``(doc, start, end)``: a character range of one document, end exclusive."""


def overlap_chars(a_start: int, a_end: int, b_start: int, b_end: int) -> int:
    """Number of characters shared by ``[a_start, a_end)`` and ``[b_start, b_end)``.

    Intervals that merely touch (``a_end == b_start``) share 0 characters.
    """
    return max(0, min(a_end, b_end) - max(a_start, b_start))


def interval_length(interval: Interval) -> int:
    """Length in characters of a ``(doc, start, end)`` interval.

    Raises ValueError unless ``0 <= start < end``: an empty span would be hit by any chunk.
    """
    doc, start, end = interval
    if not 0 <= start < end:
        raise ValueError(f"interval {interval!r} of document {doc!r} must satisfy 0 <= start < end")
    return end - start


def chunk_hits_span(chunk: Interval, span: Interval, min_span_overlap: float) -> bool:
    """True if ``chunk`` finds the evidence ``span``.

    The chunk must come from the same document and share at least ``min_span_overlap`` times
    the length of the shorter of the two intervals. With the default 1.0 the shorter one lies
    fully inside the other: the span inside the chunk, or the chunk inside a long span.

    Raises ValueError for an empty interval or a ``min_span_overlap`` outside (0, 1].
    """
    _check_min_span_overlap(min_span_overlap)
    chunk_doc, chunk_start, chunk_end = chunk
    span_doc, span_start, span_end = span
    shorter = min(interval_length(chunk), interval_length(span))
    if chunk_doc != span_doc:
        return False
    shared = overlap_chars(chunk_start, chunk_end, span_start, span_end)
    # Compare the ratio rather than ``shared >= fraction * shorter``: int / int is correctly
    # rounded, so an exact fraction such as 7/50 equals the configured 0.14, whereas
    # 0.14 * 50 == 7.000000000000001 would turn an exact match into a miss.
    return shared / shorter >= min_span_overlap


def span_hits_by_rank(
    ranked: Sequence[Interval], spans: Sequence[Interval], min_span_overlap: float
) -> list[frozenset[int]]:
    """For each retrieved chunk (rank 1 first), the indices into ``spans`` that it hits.

    Every span the chunk hits is listed, including spans already hit at a higher rank;
    deduplication is left to the metrics.
    """
    return [
        frozenset(
            index
            for index, span in enumerate(spans)
            if chunk_hits_span(chunk, span, min_span_overlap)
        )
        for chunk in ranked
    ]


def _check_min_span_overlap(min_span_overlap: float) -> None:
    if not 0.0 < min_span_overlap <= 1.0:
        raise ValueError(f"min_span_overlap={min_span_overlap} must be in (0, 1]")
