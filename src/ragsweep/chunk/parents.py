"""The parent of a retrieved chunk: the larger unit small-to-big retrieval hands back.

``retrieval.parent`` names one of :data:`PARENTS` (``none`` is no parent: the chunk is what
is handed back). A parent is a span of the chunk's document that always contains the chunk
(so evidence a chunk finds, its parent finds too), trimmed of surrounding whitespace:

* ``section``: the section(s) (:func:`ragsweep.chunk.chunkers.find_sections`: from one
  heading line to the next heading, of any level) from the one holding the chunk's start to
  the one holding its last character. A document without headings is one section.
* ``paragraph``: likewise the paragraph(s) (text between blank lines) holding the chunk.
* ``window``: ``retrieval.parent_chars`` characters centred on the chunk (shifted to stay
  inside the document; the chunk itself when it is longer).

:func:`parent_chunks` maps many chunks at once; a document's units are found once.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Sequence

from ragsweep.chunk.chunkers import Chunk, Section, find_sections, make_chunk
from ragsweep.core.registry import Registry
from ragsweep.data.corpus import Corpus, Document
from ragsweep.data.spans import Span, trim_span

NO_PARENT = "none"
"""``retrieval.parent`` when chunks are handed back as they are."""
WINDOW = "window"
"""``retrieval.parent`` for ``retrieval.parent_chars`` characters around the chunk."""

ParentFinder = Callable[[str, Span, int], Span]
"""A parent mode: given the document text, a chunk's span and ``retrieval.parent_chars``,
the (untrimmed) parent span; it must contain the chunk."""

PARENTS: Registry[ParentFinder | None] = Registry("retrieval.parent")
PARENTS.add(NO_PARENT, None)

_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n\s*")


@functools.lru_cache(maxsize=64)
def _sections(text: str) -> list[Section]:
    return find_sections(text)


@functools.lru_cache(maxsize=64)
def _section_starts(text: str) -> list[int]:
    return [s.start for s in _sections(text)] or [0]


@functools.lru_cache(maxsize=64)
def _paragraph_starts(text: str) -> list[int]:
    return [0, *(m.end() for m in _BLANK_LINES.finditer(text) if m.end() < len(text))]


def _covering_units(starts: list[int], length: int, span: Span) -> Span:
    """From the unit (given by its start; units cover the text) holding ``span``'s start to
    the one holding its last character."""
    first = max(0, bisect.bisect_right(starts, span[0]) - 1)
    last = max(first, bisect.bisect_right(starts, max(span[0], span[1] - 1)) - 1)
    return starts[first], starts[last + 1] if last + 1 < len(starts) else length


@PARENTS.register("section")
def section_parent(text: str, span: Span, size: int) -> Span:
    """The heading sections holding the chunk."""
    return _covering_units(_section_starts(text), len(text), span)


@PARENTS.register("paragraph")
def paragraph_parent(text: str, span: Span, size: int) -> Span:
    """The paragraphs (runs of non-blank lines) holding the chunk."""
    return _covering_units(_paragraph_starts(text), len(text), span)


@PARENTS.register(WINDOW)
def window_parent(text: str, span: Span, size: int) -> Span:
    """``size`` characters centred on the chunk, shifted to stay inside the text; the
    chunk's own span when it is not shorter than ``size``."""
    start, end = span
    extra = size - (end - start)
    if extra <= 0:
        return span
    start = max(0, start - extra // 2)
    end = min(len(text), start + size)
    return max(0, end - size), end


def parent_chunks(corpus: Corpus, chunks: Sequence[Chunk], mode: str, size: int) -> list[Chunk]:
    """The parent of each of ``chunks`` (in order) under parent ``mode`` with
    ``retrieval.parent_chars`` = ``size``; the chunks themselves for ``none``."""
    find = PARENTS.get(mode)
    if find is None:
        return list(chunks)
    parents: list[Chunk] = []
    for chunk in chunks:
        doc = corpus.get(chunk.doc)
        parents.append(_parent(doc, chunk, find(doc.text, (chunk.start, chunk.end), size)))
    return parents


def _parent(doc: Document, chunk: Chunk, span: Span) -> Chunk:
    """The parent chunk over ``span`` (trimmed), never narrower than ``chunk``; its heading
    path is that of the section holding its start."""
    trimmed = trim_span(doc.text, span) or (chunk.start, chunk.end)
    start, end = min(trimmed[0], chunk.start), max(trimmed[1], chunk.end)
    sections = _sections(doc.text)
    index = bisect.bisect_right(_section_starts(doc.text), start) - 1
    path = sections[index].heading_path if sections and index >= 0 else ()
    return make_chunk(doc, start, end, path)
