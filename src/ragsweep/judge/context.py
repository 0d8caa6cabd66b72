"""Packing a case's retrieved chunks into the context the generator and judge see.

Two coverages tell retrieval problems from context-assembly problems (both are fractions of
the case's evidence characters, as ``coverage_at_k`` in docs/metrics.md):

- **candidate coverage**: evidence inside the union of all retrieved chunks (the top-k);
- **packed coverage**: evidence inside what survived packing (at most ``context_chunks``
  chunks and ``context_chars`` characters, the last chunk possibly cut).

Packed coverage is never above candidate coverage; a gap means the evidence was retrieved
but did not reach the prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ragsweep.chunk.chunkers import Chunk
from ragsweep.core.hashing import sha256_json
from ragsweep.data.golden import EvidenceSpan
from ragsweep.eval.metrics import coverage_of
from ragsweep.eval.scoring import RetrievedChunk


@dataclass(frozen=True)
class Passage:
    """One packed chunk: ``text`` is ``document.text[start:end]``; ``end`` is before the
    chunk's own end when the character budget cut it (``truncated``)."""

    chunk_id: str
    doc: str
    start: int
    end: int
    text: str
    heading_path: tuple[str, ...]
    truncated: bool


@dataclass(frozen=True)
class PackedContext:
    """The passages of one case, best-ranked first, and how many chunks were retrieved."""

    passages: tuple[Passage, ...]
    n_candidates: int

    @property
    def digest(self) -> str:
        """sha256 of the passages (ids, spans and text): the context's cache identity."""
        return sha256_json(self.passages)

    @property
    def chars(self) -> int:
        """Characters of chunk text in the context (headers not counted)."""
        return sum(len(p.text) for p in self.passages)

    @property
    def truncated(self) -> bool:
        """Whether the budget dropped or cut any retrieved chunk."""
        return len(self.passages) < self.n_candidates or any(p.truncated for p in self.passages)

    def render(self) -> str:
        """The context as the models read it: numbered passages with their source."""
        blocks = []
        for number, p in enumerate(self.passages, start=1):
            source = " › ".join((p.doc, *p.heading_path))
            blocks.append(f"[{number}] {source}\n{p.text}")
        return "\n\n".join(blocks) if blocks else "(no passages were retrieved)"

    def contains_quote(self, quote: str) -> bool:
        """Whether ``quote`` occurs verbatim in one passage, comparing with every run of
        whitespace collapsed to one space."""
        needle = _collapse(quote)
        return bool(needle) and any(needle in _collapse(p.text) for p in self.passages)


def pack_context(
    retrieved: Sequence[RetrievedChunk],
    chunks_by_id: Mapping[str, Chunk],
    max_chunks: int,
    max_chars: int | None,
) -> PackedContext:
    """Take retrieved chunks in rank order until ``max_chunks`` chunks or ``max_chars``
    characters of text are reached; the chunk that crosses ``max_chars`` is cut to fit."""
    passages: list[Passage] = []
    room = max_chars
    for hit in retrieved[:max_chunks]:
        if room is not None and room <= 0:
            break
        chunk = chunks_by_id[hit.chunk_id]
        text = chunk.text if room is None else chunk.text[:room]
        cut = len(text) < len(chunk.text)
        passages.append(
            Passage(
                chunk.id,
                chunk.doc,
                chunk.start,
                chunk.start + len(text),
                text,
                chunk.heading_path,
                cut,
            )
        )
        if room is not None:
            room -= len(text)
    return PackedContext(tuple(passages), len(retrieved))


def coverages(
    retrieved: Sequence[RetrievedChunk], packed: PackedContext, evidence: Sequence[EvidenceSpan]
) -> tuple[float | None, float | None]:
    """(candidate coverage, packed coverage) of the evidence; None for unanswerable cases."""
    if not evidence:
        return None, None
    spans = [(e.doc, e.start, e.end) for e in evidence]
    candidates = [(r.doc, r.start, r.end) for r in retrieved]
    packed_spans = [(p.doc, p.start, p.end) for p in packed.passages]
    return coverage_of(candidates, spans), coverage_of(packed_spans, spans)


def _collapse(text: str) -> str:
    return " ".join(text.split())
