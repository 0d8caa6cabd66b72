"""The passage of a document closest to a quote that did not resolve, for the error message.

Both texts are compared as folded views (:func:`ragsweep.data.folding.folded_view`), so the
differences shown are the ones folding does not forgive. The passage is the window of the
document that best aligns with the quote (rapidfuzz's ``partial_ratio_alignment``: one pass
over the document, fast enough for a large one), described by its line, its similarity
(0-100) and the first character where quote and passage differ (docs/formats.md).
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from ragsweep.data.folding import NormalizedText, folded, folded_view

PASSAGE_PREVIEW_CHARS = 60
MIN_SIMILARITY = 50
"""Below this similarity (0-100) no passage is shown: nothing in the document is close."""
_MIN_SLACK = 8
LINE_BREAK = re.compile(r"\r\n?|\n")
"""A line break as editors count lines: LF, CRLF or a lone CR."""
_CONTROL_NAMES = {"\t": "CHARACTER TABULATION", "\n": "LINE FEED", "\r": "CARRIAGE RETURN"}


@dataclass(frozen=True)
class _Window:
    """Aligned ranges: ``quote[q_start:q_end]`` (folded quote) against
    ``doc[d_start:d_end]`` (folded document)."""

    q_start: int
    q_end: int
    d_start: int
    d_end: int


def describe_closest(text: str, quote: str) -> str:
    """``closest passage (line L, S% similar): '...'; first difference ...``, or a sentence
    saying why no passage is shown."""
    doc = folded_view(text)
    needle = folded(quote)
    if not needle.text.strip():
        return "the quote holds nothing but Markdown markup"
    if not doc.text.strip():
        return "the document has no text to compare the quote with"
    window, score = _best_window(needle.text, doc.text)
    raw_start, raw_end = doc.source_span(window.d_start, max(window.d_end, window.d_start + 1))
    line = len(LINE_BREAK.findall(text, 0, raw_start)) + 1
    if score < MIN_SIMILARITY or window.d_end <= window.d_start:
        return (
            f"no passage of the document is close to it "
            f"(the best, on line {line}, is {score}% similar)"
        )
    described = (
        f"closest passage (line {line}, {score}% similar): {preview(text[raw_start:raw_end])}"
    )
    difference = _first_difference(quote, needle, text, doc, window)
    return f"{described}; {difference}" if difference else described


def _best_window(needle: str, doc: str) -> tuple[_Window, int]:
    """The part of ``doc`` best aligned with ``needle`` and its similarity (0-100)."""
    found = fuzz.partial_ratio_alignment(needle, doc)
    if found is None:  # only with a score_cutoff, which is not given
        return _Window(0, 0, 0, 0), 0
    slack = max(_MIN_SLACK, (found.src_end - found.src_start) // 4)
    window = _Window(  # widened: the alignment may cut off a differing first or last char
        found.src_start,
        found.src_end,
        max(found.dest_start - slack, 0),
        min(found.dest_end + slack, len(doc)),
    )
    return _trimmed(needle, doc, window), round(found.score)


def preview(text: str, limit: int = PASSAGE_PREVIEW_CHARS) -> str:
    """``repr`` of ``text`` with whitespace runs collapsed, cut to ``limit`` characters."""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return repr(text)


def describe_char(char: str) -> str:
    """``'’' (U+2019 RIGHT SINGLE QUOTATION MARK)``: visible even when the char is not."""
    name = unicodedata.name(char, _CONTROL_NAMES.get(char, "no name"))
    return f"{char!r} (U+{ord(char):04X} {name})"


def _trimmed(needle: str, doc: str, window: _Window) -> _Window:
    """``window`` with the document characters aligned before the quote's first character
    (or after its last) left out: the passage starts and ends where the quote does."""
    opcodes = _opcodes(needle, doc, window)
    d_start, d_end = window.d_start, window.d_end
    if opcodes and opcodes[0][1] == 0:
        d_start += _excess(opcodes[0])
    if len(opcodes) > 1 and opcodes[-1][2] == window.q_end - window.q_start:
        d_end -= _excess(opcodes[-1])
    return _Window(window.q_start, window.q_end, d_start, max(d_end, d_start))


def _excess(opcode: tuple[str, int, int, int, int]) -> int:
    """How many more document than quote characters an inserted or replaced part holds."""
    tag, i1, i2, j1, j2 = opcode
    return max((j2 - j1) - (i2 - i1), 0) if tag in ("insert", "replace") else 0


def _opcodes(needle: str, doc: str, window: _Window) -> Sequence[tuple[str, int, int, int, int]]:
    quote_part = needle[window.q_start : window.q_end]
    doc_part = doc[window.d_start : window.d_end]
    return difflib.SequenceMatcher(None, quote_part, doc_part, autojunk=False).get_opcodes()


def _first_difference(
    quote: str, needle: NormalizedText, text: str, doc: NormalizedText, window: _Window
) -> str:
    """``first difference at quote character N: X, the document has Y`` (raw characters,
    N 1-based in the quote as written), or ``""`` when the aligned parts are equal."""
    q_index, d_index = _first_unequal(needle.text, doc.text, window)
    if q_index is None:
        return ""
    at_quote = needle.source_start[q_index] if q_index < len(needle.text) else len(quote)
    quote_char = describe_char(quote[at_quote]) if at_quote < len(quote) else "the quote ends"
    if d_index < window.d_end:
        doc_char = f"the document has {describe_char(text[doc.source_start[d_index]])}"
    else:
        doc_char = "the passage ends there"
    return f"first difference at quote character {at_quote + 1}: {quote_char}, {doc_char}"


def _first_unequal(needle: str, doc: str, window: _Window) -> tuple[int | None, int]:
    """Folded positions ``(in quote, in document)`` of the first difference in ``window``."""
    if window.q_start > 0:
        return 0, window.d_start  # the quote's start is not in the passage at all
    for tag, i1, _i2, j1, _j2 in _opcodes(needle, doc, window):
        if tag != "equal":
            return window.q_start + i1, window.d_start + j1
    if window.q_end < len(needle):
        return window.q_end, window.d_end
    return None, window.d_end
