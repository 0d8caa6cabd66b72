"""Where each evidence span went in one run: the rank of its first hit and the chunk that
hits it.

A run's ``cases.jsonl`` stores, per answerable case, one :class:`SpanTrace` per evidence
span (golden order) under ``spans``: ``[rank, chunk_chars]``. ``rank`` is the 1-based rank
of the first retrieved chunk that hits the span (the hit rule of
:mod:`ragsweep.eval.relevance`), None when no retrieved chunk does. ``chunk_chars`` is the
length of the shortest chunk of the run's whole chunk table that hits the span, None when
none does: a chunk boundary splits the span, so no chunk of this configuration can find
it. ``chunk_chars`` is recorded only when the run's chunk table is its complete chunking;
otherwise (the ``external`` backend without a chunk manifest knows only the chunks its
rankings name) the row is ``[rank]`` and the chunking stage is not judged. With the
per-case ``chunks_used_at_<B>c`` (how many leading chunks a budget packed) these say,
for a flipped case, which pipeline stage lost the evidence
(:mod:`ragsweep.eval.attribution`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ragsweep.chunk.chunkers import Chunk
from ragsweep.chunk.table import ChunkTable
from ragsweep.eval.relevance import Interval, IntervalBatch, codes_of, span_hits


class SpanTrace(NamedTuple):
    """One evidence span in one run (module docstring)."""

    rank: int | None
    chunk_chars: int | None
    chunked: bool = True
    """False when the run's chunks are not its complete chunking: ``chunk_chars`` unknown."""

    @property
    def split(self) -> bool:
        """True when no chunk of the run hits the span (a chunk boundary splits it)."""
        return self.chunked and self.chunk_chars is None


def traces_to_json(traces: Sequence[SpanTrace]) -> list[list[int | None]]:
    return [[t.rank, t.chunk_chars] if t.chunked else [t.rank] for t in traces]


def traces_from_json(value: Any) -> tuple[SpanTrace, ...] | None:
    """The ``spans`` field of a ``cases.jsonl`` row (None: a row written before it)."""
    if value is None:
        return None
    return tuple(
        SpanTrace(row[0], row[1]) if len(row) > 1 else SpanTrace(row[0], None, False)
        for row in value
    )


class ChunkIntervals(NamedTuple):
    """The chunks of a run's evidence documents as coded intervals sorted by document:
    ``codes`` maps document ids to the codes in ``doc`` (read with ``.get`` only: a chunk
    table's corpus positions are decoded on use, not copied)."""

    doc: np.ndarray
    start: np.ndarray
    end: np.ndarray
    codes: Mapping[str, int]

    @classmethod
    def of(cls, chunks: Sequence[Chunk], docs: Iterable[str]) -> ChunkIntervals:
        """The chunks of documents ``docs`` (the evidence documents): from a chunk table's
        spans as they are (no chunk is built, and only those documents' rows are sorted),
        else from the chunks' own."""
        if isinstance(chunks, ChunkTable):
            codes: Mapping[str, int] = chunks.doc_positions()
            spans = np.asarray(chunks.spans)
            wanted = np.array([c for c in map(codes.get, set(docs)) if c is not None], np.int64)
            rows = spans[np.isin(spans[:, 0], wanted)]
            doc, start, end = rows[:, 0], rows[:, 1], rows[:, 2]
        else:
            codes = codes_of(c.doc for c in chunks)
            doc = np.fromiter((codes[c.doc] for c in chunks), np.int64, len(chunks))
            start = np.fromiter((c.start for c in chunks), np.int64, len(chunks))
            end = np.fromiter((c.end for c in chunks), np.int64, len(chunks))
        if len(doc) > 1 and bool((doc[1:] < doc[:-1]).any()):
            order = np.argsort(doc, kind="stable")
            doc, start, end = doc[order], start[order], end[order]
        return cls(doc, start, end, codes)

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
    chunks: ChunkIntervals | None,
    min_span_overlap: float,
) -> list[tuple[SpanTrace, ...]]:
    """Per case (rows of ``ranked`` and ``spans``, coded alike; ``span_rows`` the same
    spans as plain intervals) its :class:`SpanTrace` per evidence span; ``chunks`` None:
    the run's chunks are not its complete chunking, so ``chunk_chars`` is unknown."""
    hits = span_hits(ranked, spans, min_span_overlap).hits  # (cases, depth, spans)
    found: np.ndarray = np.asarray(hits.any(axis=1))
    first: np.ndarray = np.asarray(hits.argmax(axis=1)) + 1
    return [
        tuple(
            SpanTrace(
                int(first[c, s]) if found[c, s] else None,
                chunks.holding(span, min_span_overlap) if chunks is not None else None,
                chunks is not None,
            )
            for s, span in enumerate(row)
        )
        for c, row in enumerate(span_rows)
    ]
