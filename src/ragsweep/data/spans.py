"""Character spans of a document's text, and trimming them of surrounding whitespace.

A span is ``(start, end)``: 0-based, end-exclusive code-point offsets into a document's
text. Chunks (:mod:`ragsweep.chunk.chunkers`) and golden evidence spans
(:mod:`ragsweep.data.golden_lines`) are both trimmed with :func:`trim_span`, so they line up.
This module is part of the chunker's source digest (the ``chunks`` cache key): keep it small.
"""

from __future__ import annotations

Span = tuple[int, int]
"""``(start, end)`` code-point offsets into a document's text, end-exclusive."""


def trim_span(text: str, span: Span) -> Span | None:
    """``span`` without leading/trailing whitespace, or None if it is whitespace only.

    Chunks and golden evidence spans are both trimmed with it, so they line up.
    """
    start, end = span
    segment = text[start:end]
    stripped = segment.strip()
    if not stripped:
        return None
    new_start = start + len(segment) - len(segment.lstrip())
    return new_start, new_start + len(stripped)
