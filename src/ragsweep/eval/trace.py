"""Where each evidence span went in one run: the rank of its first hit and the chunk that
holds it.

A run's ``cases.jsonl`` stores, per answerable case, one :class:`SpanTrace` per evidence
span (golden order) under ``spans``: ``[rank, chunk_chars]``. ``rank`` is the 1-based rank
of the first retrieved chunk that hits the span (the hit rule of
:mod:`ragsweep.eval.relevance`), None when no retrieved chunk does. ``chunk_chars`` is the
length of the shortest chunk of the run's whole chunk table that hits the span, None when
none does: a chunk boundary splits the span, so no chunk of this configuration can find
it. With the per-case ``chunks_used_at_<B>c`` (how many leading chunks a budget packed)
these say, for a flipped case, which pipeline stage lost the evidence
(:mod:`ragsweep.eval.attribution`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ragsweep.chunk.chunkers import Chunk
from ragsweep.chunk.table import ChunkTable
from ragsweep.eval.relevance import Interval, IntervalBatch, codes_of, span_hits


class SpanTrace(NamedTuple):
    """One evidence span in one run (module docstring)."""

    rank: int | None
    chunk_chars: int | None

    @property
    def split(self) -> bool:
        """True when no chunk of the run holds the span (a chunk boundary splits it)."""
        return self.chunk_chars is None


def traces_to_json(traces: Sequence[SpanTrace]) -> list[list[int | None]]:
    return [[t.rank, t.chunk_chars] for t in traces]


def traces_from_json(value: Any) -> tuple[SpanTrace, ...] | None:
    """The ``spans`` field of a ``cases.jsonl`` row (None: a row written before it)."""
    if value is None:
        return None
    return tuple(SpanTrace(rank, chars) for rank, chars in value)


class ChunkIntervals(NamedTuple):
    """Every chunk of a run as coded intervals sorted by document: ``codes`` maps document
    ids to the codes in ``doc``."""

    doc: np.ndarray
    start: np.ndarray
    end: np.ndarray
    codes: dict[str, int]

    @classmethod
    def of(cls, chunks: Sequence[Chunk]) -> ChunkIntervals:
        """A chunk table's spans as they are (no chunk is built), else the chunks' own."""
        if isinstance(chunks, ChunkTable):
            spans = np.asarray(chunks.spans)
            doc, start, end = spans[:, 0], spans[:, 1], spans[:, 2]
            codes = dict(chunks.doc_positions())
        else:
            codes = codes_of(c.doc for c in chunks)
            doc = np.fromiter((codes[c.doc] for c in chunks), np.int64, len(chunks))
            start = np.fromiter((c.start for c in chunks), np.int64, len(chunks))
            end = np.fromiter((c.end for c in chunks), np.int64, len(chunks))
        order = np.argsort(doc, kind="stable")
        return cls(doc[order], start[order], end[order], codes)

    def holding(self, span: Interval, min_span_overlap: float) -> int | None:
        """The length of the shortest chunk that hits ``span``, None when none does."""
        code = self.codes.get(span[0])
        if code is None:
            return None
        lo, hi = np.searchsorted(self.doc, [code, code + 1])
        if lo == hi:
            return None
        batch = IntervalBatch(self.doc[None, lo:hi], self.start[None, lo:hi], self.end[None, lo:hi])
        one = IntervalBatch(
            np.array([[code]], np.int64),
            np.array([[span[1]]], np.int64),
            np.array([[span[2]]], np.int64),
        )
        hits = span_hits(batch, one, min_span_overlap).hits[0, :, 0]
        if not hits.any():
            return None
        return int((batch.end[0] - batch.start[0])[hits].min())


def span_traces(
    ranked: IntervalBatch,
    spans: IntervalBatch,
    span_rows: Sequence[Sequence[Interval]],
    chunks: ChunkIntervals,
    min_span_overlap: float,
) -> list[tuple[SpanTrace, ...]]:
    """Per case (rows of ``ranked`` and ``spans``, coded alike; ``span_rows`` the same
    spans as plain intervals) its :class:`SpanTrace` per evidence span."""
    hits = span_hits(ranked, spans, min_span_overlap).hits  # (cases, depth, spans)
    found: np.ndarray = np.asarray(hits.any(axis=1))
    first: np.ndarray = np.asarray(hits.argmax(axis=1)) + 1
    return [
        tuple(
            SpanTrace(
                int(first[c, s]) if found[c, s] else None,
                chunks.holding(span, min_span_overlap),
            )
            for s, span in enumerate(row)
        )
        for c, row in enumerate(span_rows)
    ]
