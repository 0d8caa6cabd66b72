"""``chunking.mode=semantic``: chunks cut where neighbouring sentences' meanings diverge.

The text is split into sentences (after ``.``, ``!``, ``?`` and their CJK forms followed by
whitespace, and at blank lines); each sentence is embedded (an ``embed`` function from the
run: :mod:`ragsweep.index.semantic`), and the cosine distance between each sentence and the
next is computed. A chunk ends after every sentence whose distance to the next is above
``chunking.breakpoint_percentile`` of the document's distances (LangChain's and Chroma's
"percentile" breakpoints), and also before a sentence that would take it over
``chunking.size`` characters; a sentence longer than ``size`` is cut into windows of
``size``. The spans are offsets into the text, as every chunker's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from ragsweep.data.spans import Span, trim_span

Embed = Callable[[Sequence[str]], np.ndarray]
"""Texts → L2-normalized vectors, one row per text."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n[ \t]*\n\s*")


def sentence_spans(text: str) -> list[Span]:
    """The sentences of ``text`` as trimmed spans, in order."""
    spans: list[Span] = []
    start = 0
    for match in [*_SENTENCE_END.finditer(text), None]:
        end = len(text) if match is None else match.start()
        trimmed = trim_span(text, (start, end))
        if trimmed is not None:
            spans.append(trimmed)
        if match is not None:
            start = match.end()
    return spans


def breakpoints(vectors: np.ndarray, percentile: float) -> set[int]:
    """The indices i after which a chunk ends: cosine distance between sentences i and
    i + 1 above ``percentile`` of all neighbouring distances."""
    if len(vectors) < 2:
        return set()
    distances = 1.0 - np.sum(vectors[:-1] * vectors[1:], axis=1)
    threshold = np.percentile(distances, percentile)
    return {int(i) for i in np.nonzero(distances > threshold)[0]}


def semantic_spans(text: str, size: int, percentile: float, embed: Embed) -> list[Span]:
    """The chunk spans of ``text`` (module docstring)."""
    sentences = _capped(sentence_spans(text), size)
    if not sentences:
        return []
    cuts = breakpoints(embed([text[s:e] for s, e in sentences]), percentile)
    spans: list[Span] = []
    start = sentences[0][0]
    for index, (s_start, s_end) in enumerate(sentences):
        if s_end - start > size and s_start > start:
            spans.append((start, sentences[index - 1][1]))
            start = s_start
        if index in cuts or index == len(sentences) - 1:
            spans.append((start, s_end))
            if index + 1 < len(sentences):
                start = sentences[index + 1][0]
    return spans


def _capped(sentences: list[Span], size: int) -> list[Span]:
    """``sentences`` with each one longer than ``size`` cut into windows of ``size``."""
    out: list[Span] = []
    for start, end in sentences:
        out.extend((s, min(s + size, end)) for s in range(start, end, size))
    return out
