"""Cut source documents into chunks that are exact, offset-addressed spans of their text.

A chunk is ``document.text[start:end]`` (0-based, end-exclusive code-point offsets), trimmed
of surrounding whitespace and at most ``chunking.size`` characters long. Every
non-whitespace character of a document lies in at least one chunk, so span-based metrics can
always find the evidence somewhere. Three modes are registered in :data:`CHUNKERS`:

* ``fixed``: windows of ``size`` characters, ``size - overlap`` apart.
* ``paragraph``: consecutive paragraphs packed greedily up to ``size``; overlap is whole
  trailing paragraphs of the previous chunk.
* ``heading``: one chunk per section (see :func:`find_sections`), oversize sections cut
  into fixed windows.
* ``recursive`` and ``sentence``: chonkie's (MIT) ``RecursiveChunker`` (paragraphs, then
  lines, sentences, words) and ``SentenceChunker`` (whole sentences packed up to ``size``,
  with ``overlap``), sizes in characters; their start/end offsets are checked against the
  text on every chunk (:func:`library_spans`).

Every chunk records the heading path of the section that contains its start, whatever the
mode, so ``heading_prefix`` can prepend it to the indexed text.
"""

from __future__ import annotations

import bisect
import functools
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

from ragsweep.chunk import semantic as chunk_semantic
from ragsweep.chunk import tokens as chunk_tokens
from ragsweep.chunk.semantic import Embed, semantic_spans
from ragsweep.chunk.tokens import ChunkTokenizer, token_windows
from ragsweep.config.schema import ChunkingConfig, result_fields
from ragsweep.core.hashing import source_digest
from ragsweep.core.registry import Registry
from ragsweep.data import spans as data_spans
from ragsweep.data.corpus import Corpus, Document
from ragsweep.data.spans import Span, trim_span


@dataclass(frozen=True)
class ChunkTools:
    """What a mode may need besides the text and the config: the tokenizer sizes are
    counted in (``chunking.unit=tokens``; None: characters)."""

    tokenizer: ChunkTokenizer | None = None
    embedder: str = ""
    """``chunking.mode=semantic``: the key of the model that embeds sentences
    (:mod:`ragsweep.index.semantic`); part of the chunks' cache key."""
    embed: Embed | None = field(default=None, compare=False)
    """That model's embedding function (given by the run, cache-backed)."""


NO_TOOLS = ChunkTools()
"""Sizes in characters, nothing else."""


def chunking_identity(cfg: ChunkingConfig, stage: str | None = None) -> dict[str, Any]:
    """The result fields of ``cfg`` (of ``stage``) without ``tokenizer``: a tokenizer file
    stands in a hash by its sha256 (:attr:`ChunkTools.tokenizer`), not its path, so moving
    the file changes nothing."""
    return {k: v for k, v in result_fields(cfg, stage).items() if k != "tokenizer"}


SpanFinder = Callable[[str, Sequence["Section"], ChunkingConfig, ChunkTools], list[Span]]
"""A chunking mode: given the text, its sections, the config and the tools, the raw chunk
spans in start order. Spans may carry surrounding whitespace; :func:`chunk_document` trims
them."""

CHUNKERS: Registry[SpanFinder] = Registry("chunking.mode")

CHUNK_LIBRARY = "chonkie"
"""The library behind the ``recursive`` and ``sentence`` modes (its version is part of the
chunks' cache key)."""

LIBRARY_MODES = ("recursive", "sentence")
"""The modes cut by :data:`CHUNK_LIBRARY`."""

SEMANTIC = "semantic"
"""The mode whose breakpoints come from sentence embeddings (:mod:`ragsweep.chunk.semantic`)."""

TOKEN_MODES = ("fixed", *LIBRARY_MODES)
"""The modes that can measure sizes in tokens (``chunking.unit=tokens``)."""

CHUNKER_SOURCE_DIGEST: str = source_digest(
    sys.modules[__name__], data_spans, chunk_tokens, chunk_semantic
)
"""Digest of the source of this module, of :mod:`ragsweep.data.spans` (which trims every
chunk's span), :mod:`ragsweep.chunk.tokens` and :mod:`ragsweep.chunk.semantic`: cached
chunks are invalid once the chunking code changes."""

MAX_NUMBERED_HEADING_CHARS = 80
"""A plain-text numbered heading (``3.1 Scope``) is a short line; longer lines are prose."""

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(={3,}|-{3,})[ \t]*$")
_THEMATIC_BREAK = re.compile(r"^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_NUMBERED = re.compile(r"^(\d+(?:\.\d+)*)(\.?)[ \t]+(\S.*)$")
_KEYWORD_NUMBERED = re.compile(
    r"^(?:Section|SECTION|Article|ARTICLE|Chapter|CHAPTER|Clause|CLAUSE)[ \t]+"
    r"(\d+(?:\.\d+)*)\.?(?:[ \t]+\S.*)?$"
)
_CJK_NUMBERED = re.compile(r"^第[ \t]*[0-9０-９一二三四五六七八九十百千〇]+[ \t]*([章節条])")
_CJK_LEVELS = {"章": 1, "節": 2, "条": 3}  # chapter > section > article, as in Japanese statutes
_SENTENCE_END = tuple(".:;,?!。．：；，、？！")


@dataclass(frozen=True)
class Chunk:
    """A contiguous span of one source document."""

    id: str
    """``f"{doc}@{start}-{end}"``: derived from the span, so stable across runs."""
    doc: str
    """The :attr:`Document.id` the span belongs to."""
    start: int
    """0-based code-point offset of the first character in ``Document.text``."""
    end: int
    """Exclusive end offset: ``text == document.text[start:end]``."""
    text: str
    heading_path: tuple[str, ...]
    """Headings of the section containing ``start``, outermost first; ``()`` if none."""


@dataclass(frozen=True)
class Section:
    """The text from one heading line up to the next heading (or the end of the text).

    Text before the first heading is a section with an empty ``heading_path`` whose
    ``body_start`` equals ``start``.
    """

    start: int
    """Offset of the heading line (0 for the text before the first heading)."""
    end: int
    """Exclusive end: the next section's ``start`` or ``len(text)``."""
    heading_path: tuple[str, ...]
    """Titles of this heading and its enclosing headings, outermost first."""
    body_start: int
    """Offset just after the heading line(s), newline included."""

    @property
    def has_heading(self) -> bool:
        return self.body_start > self.start


@dataclass(frozen=True)
class _Line:
    """One line of a text: ``content`` excludes the terminator (``\\n``, ``\\r\\n`` or ``\\r``)."""

    start: int
    end: int
    """Offset after the terminator (``len(text)`` for a final unterminated line)."""
    content: str

    @property
    def is_blank(self) -> bool:
        return not self.content.strip()


@dataclass(frozen=True)
class _Heading:
    start: int
    body_start: int
    level: int
    title: str


_LINE_END = re.compile(r"\r\n|\r|\n")
"""A line ends at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (CommonMark's line endings), so
files with classic Mac (CR-only) line endings have lines too. Other separators that
``str.splitlines`` knows (U+2028, U+0085, ...) do not end a line."""


def _split_lines(text: str) -> list[_Line]:
    """The lines of ``text`` (see :data:`_LINE_END`); ``content`` drops the terminator.
    Offsets are into ``text`` unchanged: nothing is rewritten."""
    lines: list[_Line] = []
    start = 0
    for match in _LINE_END.finditer(text):
        lines.append(_Line(start, match.end(), text[start : match.start()]))
        start = match.end()
    if start < len(text):
        lines.append(_Line(start, len(text), text[start:]))
    return lines


# ---------------------------------------------------------------------------- headings


def find_sections(text: str) -> list[Section]:
    """Split ``text`` into sections at its headings; the sections cover it in order, no gaps.

    Recognized headings: Markdown ATX (``## Title``, outside fenced code blocks), setext
    (a text line underlined with ``===`` for level 1 or ``---`` for level 2), and numbered
    plain-text headings standing alone between blank lines (``3. Confidentiality``,
    ``3.1 Scope``, ``Section 2.1``, ``Article 4``; level = number of dotted components;
    ``第N章/節/条`` get levels 1/2/3). A heading of level L closes every open heading of
    level >= L. Titles are kept without ``#`` marks or underline.
    """
    if not text:
        return []
    return _sections_from_headings(text, _find_headings(_split_lines(text)))


def _sections_from_headings(text: str, headings: list[_Heading]) -> list[Section]:
    first_heading = headings[0].start if headings else len(text)
    sections = [Section(0, first_heading, (), 0)] if first_heading > 0 else []
    open_headings: list[_Heading] = []
    for index, heading in enumerate(headings):
        end = headings[index + 1].start if index + 1 < len(headings) else len(text)
        while open_headings and open_headings[-1].level >= heading.level:
            open_headings.pop()
        open_headings.append(heading)
        path = tuple(h.title for h in open_headings)
        sections.append(Section(heading.start, end, path, heading.body_start))
    return sections


def _find_headings(lines: list[_Line]) -> list[_Heading]:
    headings: list[_Heading] = []
    fence: str | None = None  # the opening fence marker while inside a fenced code block
    index = 0
    while index < len(lines):
        content = lines[index].content
        if fence is not None:
            if _closes_fence(content, fence):
                fence = None
            index += 1
            continue
        opening = _FENCE.match(content)
        if opening:
            fence = opening.group(1)
            index += 1
            continue
        found = _heading_at(lines, index)
        if found is None:
            index += 1
            continue
        heading, n_lines = found
        headings.append(heading)
        index += n_lines
    return headings


def _closes_fence(content: str, fence: str) -> bool:
    closing = _FENCE.match(content)
    return (
        closing is not None
        and closing.group(1)[0] == fence[0]
        and len(closing.group(1)) >= len(fence)
        and not content[closing.end() :].strip()
    )


def _heading_at(lines: list[_Line], index: int) -> tuple[_Heading, int] | None:
    """The heading starting at ``lines[index]`` and how many lines it spans, if any."""
    line = lines[index]
    atx = _ATX.match(line.content)
    if atx and atx.group(2):
        return _Heading(line.start, line.end, len(atx.group(1)), atx.group(2)), 1
    underline = _setext_underline(lines, index)
    if underline is not None:
        level = 1 if underline.content.strip().startswith("=") else 2
        return _Heading(line.start, underline.end, level, line.content.strip()), 2
    numbered_level = _numbered_heading_level(line.content.strip())
    if numbered_level is not None and _stands_alone(lines, index):
        return _Heading(line.start, line.end, numbered_level, line.content.strip()), 1
    return None


def _setext_underline(lines: list[_Line], index: int) -> _Line | None:
    """The underline making ``lines[index]`` a setext heading, or None."""
    if index + 1 >= len(lines):
        return None
    text_line, underline = lines[index], lines[index + 1]
    if text_line.is_blank or not _SETEXT_UNDERLINE.match(underline.content):
        return None
    if _SETEXT_UNDERLINE.match(text_line.content) or _THEMATIC_BREAK.match(text_line.content):
        return None
    return underline


def _stands_alone(lines: list[_Line], index: int) -> bool:
    """Preceded by a blank line (or the start of text) and followed by a blank line."""
    after_blank = index == 0 or lines[index - 1].is_blank
    before_blank = index + 1 < len(lines) and lines[index + 1].is_blank
    return after_blank and before_blank


def _numbered_heading_level(line: str) -> int | None:
    """Level of a numbered plain-text heading line (already stripped), or None.

    ``3. Confidentiality`` → 1, ``3.1 Scope of Service`` → 2, ``Section 2.1`` → 2.
    Sentences (``1. Open Settings and click Save.``), long lines, lone numbers
    (``2024 Results``) and lowercase continuations (``1.5 million people``) are rejected.
    """
    if len(line) > MAX_NUMBERED_HEADING_CHARS or line.endswith(_SENTENCE_END):
        return None
    keyword = _KEYWORD_NUMBERED.match(line)
    if keyword:
        return keyword.group(1).count(".") + 1
    cjk = _CJK_NUMBERED.match(line)
    if cjk:
        return _CJK_LEVELS[cjk.group(1)]
    numbered = _NUMBERED.match(line)
    if numbered is None:
        return None
    number, dot, title = numbered.groups()
    components = number.count(".") + 1
    if components == 1 and not dot:
        return None
    if not title[0].isalpha() or title[0].islower():
        return None
    return components


def _heading_path_at(
    sections: Sequence[Section], section_starts: list[int], offset: int
) -> tuple[str, ...]:
    index = bisect.bisect_right(section_starts, offset) - 1
    return sections[index].heading_path if index >= 0 else ()


# ---------------------------------------------------------------------------- span helpers


def _windows(start: int, end: int, size: int, overlap: int) -> list[Span]:
    """Windows of ``size`` characters from ``start``, ``size - overlap`` apart, the last one
    ending at ``end``; a single window when the range fits."""
    spans: list[Span] = []
    window_start = start
    while window_start < end:
        window_end = min(window_start + size, end)
        spans.append((window_start, window_end))
        if window_end == end:
            break
        window_start += size - overlap
    return spans


def _contains(outer: Span, inner: Span) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def _clean_spans(text: str, spans: list[Span]) -> list[Span]:
    """Trim every span, drop whitespace-only ones and any span redundant with its neighbour
    (trimming can make a window fall inside the previous one, or swallow it)."""
    kept: list[Span] = []
    for span in spans:
        trimmed = trim_span(text, span)
        if trimmed is None:
            continue
        while kept and _contains(trimmed, kept[-1]):
            kept.pop()
        if kept and _contains(kept[-1], trimmed):
            continue
        kept.append(trimmed)
    return kept


# ---------------------------------------------------------------------------- modes


@CHUNKERS.register("fixed")
def fixed_spans(
    text: str, sections: Sequence[Section], cfg: ChunkingConfig, tools: ChunkTools
) -> list[Span]:
    """Windows of ``cfg.size`` characters (or tokens) over the whole text, ``size -
    overlap`` apart."""
    if tools.tokenizer is not None:
        return token_windows(text, tools.tokenizer, cfg.size, cfg.overlap)
    return _windows(0, len(text), cfg.size, cfg.overlap)


@CHUNKERS.register("paragraph")
def paragraph_spans(
    text: str, sections: Sequence[Section], cfg: ChunkingConfig, tools: ChunkTools
) -> list[Span]:
    """Consecutive paragraphs packed greedily while their span fits in ``cfg.size``.

    With overlap, a chunk starts with the trailing whole paragraphs of the previous chunk
    whose span fits in ``cfg.overlap``, unless that would not reach past the previous chunk.
    A paragraph longer than ``cfg.size`` is cut into fixed windows of its own.
    """
    paragraphs = _paragraphs(text)
    spans: list[Span] = []
    first = 0
    while first < len(paragraphs):
        start, end = paragraphs[first]
        if end - start > cfg.size:
            spans.extend(_windows(start, end, cfg.size, cfg.overlap))
            first += 1
            continue
        last = _last_fitting(paragraphs, first, cfg.size)
        spans.append((start, paragraphs[last][1]))
        first = _next_first(paragraphs, first, last, cfg)
    return spans


def _paragraphs(text: str) -> list[Span]:
    """Spans of the runs of non-blank lines, trimmed of surrounding whitespace."""
    paragraphs: list[Span] = []
    run: list[_Line] = []
    for line in [*_split_lines(text), None]:
        if line is not None and not line.is_blank:
            run.append(line)
            continue
        if run:
            trimmed = trim_span(text, (run[0].start, run[-1].start + len(run[-1].content)))
            if trimmed is not None:
                paragraphs.append(trimmed)
            run = []
    return paragraphs


def _last_fitting(paragraphs: list[Span], first: int, size: int) -> int:
    """Index of the last paragraph that fits in one chunk starting with ``first``."""
    last = first
    start = paragraphs[first][0]
    while last + 1 < len(paragraphs) and paragraphs[last + 1][1] - start <= size:
        last += 1
    return last


def _next_first(paragraphs: list[Span], first: int, last: int, cfg: ChunkingConfig) -> int:
    """First paragraph of the chunk after the one spanning paragraphs ``first..last``."""
    if cfg.overlap == 0 or last + 1 >= len(paragraphs):
        return last + 1
    end = paragraphs[last][1]
    for candidate in range(first + 1, last + 1):
        if end - paragraphs[candidate][0] <= cfg.overlap:
            reaches_further = _last_fitting(paragraphs, candidate, cfg.size) > last
            return candidate if reaches_further else last + 1
    return last + 1


@CHUNKERS.register("heading")
def heading_spans(
    text: str, sections: Sequence[Section], cfg: ChunkingConfig, tools: ChunkTools
) -> list[Span]:
    """One chunk per section; a heading with a blank body joins the section after it when
    the merged span fits in ``cfg.size``; longer spans become fixed windows."""
    spans: list[Span] = []
    for start, end in _merge_blank_bodies(text, sections, cfg.size):
        spans.extend(_windows(start, end, cfg.size, cfg.overlap))
    return spans


def _merge_blank_bodies(text: str, sections: Sequence[Section], size: int) -> list[Span]:
    """Section spans, where headings with a blank body join the section that follows them so
    that ``## Billing`` directly followed by ``### Refunds`` is one chunk.

    When a run of blank-body headings and its content section do not fit in ``size``
    together, the headings nearest to the content are kept with it and the outer ones form
    a heading-only span.
    """
    spans: list[Span] = []
    first = 0
    while first < len(sections):
        content = first
        while content + 1 < len(sections) and _body_is_blank(text, sections[content]):
            content += 1
        joined = first
        while joined < content and sections[content].end - sections[joined].start > size:
            joined += 1
        if joined > first:
            spans.append((sections[first].start, sections[joined].start))
        spans.append((sections[joined].start, sections[content].end))
        first = content + 1
    return spans


def _body_is_blank(text: str, section: Section) -> bool:
    return section.has_heading and not text[section.body_start : section.end].strip()


# ---------------------------------------------------------------------------- library modes


class ChunkOffsetError(AssertionError):
    """A library chunk whose offsets do not give its text back (a library bug)."""


@functools.lru_cache(maxsize=8)
def _library_chunker(mode: str, size: int, overlap: int, tokenizer: ChunkTokenizer | None) -> Any:
    """A chonkie chunker measuring sizes in characters, or in the tokens of ``tokenizer``
    (imported on first use)."""
    from chonkie import RecursiveChunker, RecursiveRules, SentenceChunker

    counter = "character" if tokenizer is None else tokenizer.load()
    if mode == "sentence":
        return SentenceChunker(tokenizer=counter, chunk_size=size, chunk_overlap=overlap)
    rules = RecursiveRules()
    if tokenizer is not None:  # its last level decodes tokens, which is not the text back
        rules = RecursiveRules(levels=list(rules.levels or [])[:-1])  # uncased: lowercased
    return RecursiveChunker(tokenizer=counter, chunk_size=size, rules=rules)


def library_spans(mode: str, text: str, cfg: ChunkingConfig, tools: ChunkTools) -> list[Span]:
    """The spans of the library's chunks of ``text``; each chunk's text must equal
    ``text[start:end]`` (ChunkOffsetError otherwise), so span labels keep working."""
    if not text.strip():
        return []
    spans: list[Span] = []
    chunker = _library_chunker(mode, cfg.size, cfg.overlap, tools.tokenizer)
    for chunk in chunker.chunk(text):
        if text[chunk.start_index : chunk.end_index] != chunk.text:
            raise ChunkOffsetError(f"{mode} chunk at {chunk.start_index} is not text[start:end]")
        spans.append((chunk.start_index, chunk.end_index))
    return spans


@CHUNKERS.register("recursive")
def recursive_spans(
    text: str, sections: Sequence[Section], cfg: ChunkingConfig, tools: ChunkTools
) -> list[Span]:
    """chonkie's recursive splitter (paragraphs, lines, sentences, words) up to ``size``
    characters (or tokens); ``overlap`` is not used (the splitter has none)."""
    return library_spans("recursive", text, cfg, tools)


@CHUNKERS.register("sentence")
def sentence_spans(
    text: str, sections: Sequence[Section], cfg: ChunkingConfig, tools: ChunkTools
) -> list[Span]:
    """Whole sentences packed up to ``size`` characters (or tokens), ``overlap`` of them
    repeated (chonkie's sentence chunker)."""
    return library_spans("sentence", text, cfg, tools)


@CHUNKERS.register(SEMANTIC)
def semantic_mode_spans(
    text: str, sections: Sequence[Section], cfg: ChunkingConfig, tools: ChunkTools
) -> list[Span]:
    """Sentences grouped between semantic breakpoints, up to ``size`` characters
    (:mod:`ragsweep.chunk.semantic`); ``overlap`` is not used."""
    if tools.embed is None:
        raise ValueError("chunking.mode=semantic needs the run's sentence embedder")
    return semantic_spans(text, cfg.size, cfg.breakpoint_percentile, tools.embed)


def chunk_library_version() -> str:
    """The installed version of :data:`CHUNK_LIBRARY`."""
    return version(CHUNK_LIBRARY)


# ---------------------------------------------------------------------------- public API


def chunk_document(doc: Document, cfg: ChunkingConfig, tools: ChunkTools = NO_TOOLS) -> list[Chunk]:
    """The chunks of ``doc`` in offset order; ``[]`` for an empty or blank document.

    Raises ConfigError naming ``chunking.mode`` when the mode is not registered.
    """
    find_spans = CHUNKERS.get(cfg.mode)
    sections = find_sections(doc.text)
    section_starts = [s.start for s in sections]
    spans = _clean_spans(doc.text, find_spans(doc.text, sections, cfg, tools))
    return [
        make_chunk(doc, start, end, _heading_path_at(sections, section_starts, start))
        for start, end in spans
    ]


def make_chunk(doc: Document, start: int, end: int, heading_path: tuple[str, ...]) -> Chunk:
    """The chunk of ``doc`` covering ``[start, end)``; its id is derived from the span."""
    return Chunk(
        id=f"{doc.id}@{start}-{end}",
        doc=doc.id,
        start=start,
        end=end,
        text=doc.text[start:end],
        heading_path=heading_path,
    )


def chunk_corpus(corpus: Corpus, cfg: ChunkingConfig, tools: ChunkTools = NO_TOOLS) -> list[Chunk]:
    """The chunks of every document, in corpus order and then offset order."""
    CHUNKERS.get(cfg.mode)  # fail on an unknown mode even for an empty corpus
    return [chunk for doc in corpus for chunk in chunk_document(doc, cfg, tools)]


def indexed_text(chunk: Chunk, heading_prefix: bool, title: str | None = None) -> str:
    """The text that is normalized and embedded for ``chunk``.

    With ``heading_prefix`` and a non-empty heading path:
    ``"Outer > Inner\\n\\n" + chunk.text``; otherwise ``chunk.text`` unchanged. A ``title``
    (``chunking.title_prefix``: the document's title) comes first, on a line of its own.
    """
    header = [title] if title else []
    if heading_prefix and chunk.heading_path:
        header.append(" > ".join(chunk.heading_path))
    return "\n".join(header) + "\n\n" + chunk.text if header else chunk.text
