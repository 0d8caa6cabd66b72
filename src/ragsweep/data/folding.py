"""Normalized views of a text for matching quotes, each with a map back to the source.

A view is the text under NFKC and whitespace collapsing (every run of whitespace becomes
one space); a *folded* view (docs/formats.md, "How quotes are matched") also turns
typographic quotes and dashes into ASCII, drops invisible characters and drops Markdown
inline markup. Each view character remembers the source characters it came from, so a match
in the view maps back to exact source offsets.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

SINGLE_QUOTES = "\u2018\u2019\u201a\u201b\u2032\u2039\u203a"
"""‘ ’ ‚ ‛ ′ ‹ › — folded to ``'``."""
DOUBLE_QUOTES = "\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb"
"""“ ” „ ‟ ″ « » — folded to ``"``."""
DASHES = "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"
"""‐ ‑ ‒ – — ― − (hyphen, non-breaking hyphen, figure dash, en and em dash, horizontal bar,
minus sign) — folded to ``-``."""
INVISIBLE = "\u00ad\u200b\u2060\ufeff"
"""Soft hyphen, zero-width space, word joiner, zero-width no-break space — dropped."""

_FOLD = str.maketrans(
    {
        **dict.fromkeys(SINGLE_QUOTES, "'"),
        **dict.fromkeys(DOUBLE_QUOTES, '"'),
        **dict.fromkeys(DASHES, "-"),
    }
)

_LINK = re.compile(
    r"(!?\[)([^\[\]]*)(\]\([ \t]*(?:<[^<>\n]*>|[^\s()]*)"
    r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*\))"
)
"""An inline link ``[text](url "title")`` or image ``![alt](url)``: groups opener, text,
closer (the closer holds the URL and title)."""
_REFERENCE_LINK = re.compile(r"(!?\[)([^\[\]]*)(\]\[[^\[\]\n]*\])")
"""A reference link ``[text][ref]`` or image ``![alt][ref]``."""
_AUTOLINK = re.compile(r"(<)([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>@]+)(>)")
"""An autolink ``<https://...>`` or ``<name@example.com>``."""
_MARKERS = re.compile(r"[`*_]|~~|[" + INVISIBLE + "]")
"""Code-span backticks, emphasis markers, strikethrough and invisible characters."""


@dataclass(frozen=True)
class NormalizedText:
    """A normalized copy of a source text with a map back to the source.

    Normalized character ``i`` comes from source characters
    ``[source_start[i], source_end[i])``.
    """

    text: str
    source_start: array[int]
    source_end: array[int]

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """Source offsets covering normalized characters ``[start, end)``."""
        return self.source_start[start], self.source_end[end - 1]


@functools.lru_cache(maxsize=16)
def normalized_view(text: str) -> NormalizedText:
    """NFKC ``text`` piece by piece, collapse whitespace runs to one space, keep the map."""
    return _view(text, range(len(text)), fold=False)


def folded(text: str) -> NormalizedText:
    """:func:`normalized_view` of ``text`` without its Markdown markup and invisible
    characters, with typographic quotes and dashes folded to ASCII (not cached: for quotes)."""
    return _view(text, kept_positions(text), fold=True)


@functools.lru_cache(maxsize=16)
def folded_view(text: str) -> NormalizedText:
    """:func:`folded`, cached: for documents, which many quotes are matched against."""
    return folded(text)


def kept_positions(text: str) -> list[int]:
    """The positions of ``text`` left once Markdown inline markup and invisible characters
    are removed: link and image syntax around the link text, autolink brackets, backticks,
    ``*`` and ``_`` emphasis markers, ``~~``."""
    dropped = bytearray(len(text))
    for pattern in (_LINK, _REFERENCE_LINK, _AUTOLINK):
        for match in pattern.finditer(text):
            dropped[match.start(1) : match.end(1)] = b"\1" * len(match.group(1))
            dropped[match.start(3) : match.end(3)] = b"\1" * len(match.group(3))
    for match in _MARKERS.finditer(text):
        dropped[match.start() : match.end()] = b"\1" * (match.end() - match.start())
    return [position for position, drop in enumerate(dropped) if not drop]


def _view(text: str, kept: range | list[int], fold: bool) -> NormalizedText:
    """The normalized view of the characters of ``text`` at positions ``kept``."""
    source = "".join(text[position] for position in kept) if fold else text
    if fold:
        source = source.translate(_FOLD)  # before NFKC: ″ must become ", not ′′
    chars: list[str] = []
    source_start: array[int] = array("q")
    source_end: array[int] = array("q")
    for start, end, piece in nfkc_pieces(source):
        raw_start, raw_end = kept[start], kept[end - 1] + 1
        for char in piece.translate(_FOLD) if fold else piece:
            if char.isspace() and chars and chars[-1] == " ":
                source_end[-1] = raw_end  # extend the current whitespace run
                continue
            chars.append(" " if char.isspace() else char)
            source_start.append(raw_start)
            source_end.append(raw_end)
    return NormalizedText("".join(chars), source_start, source_end)


def nfkc_pieces(text: str) -> Iterator[tuple[int, int, str]]:
    """Split ``text`` into pieces ``(start, end, NFKC(text[start:end]))`` whose normalized
    forms concatenate to the normalization of the whole text.

    NFKC composes across characters (a half-width katakana and its voiced mark become one
    character, so do combining accents), so a piece is a starter followed by every
    character that can still combine with it; each normalized character is then mapped to
    the whole piece it came from.
    """
    start = 0
    for index in range(1, len(text) + 1):
        if index == len(text) or _starts_new_piece(text[start:index], text[index]):
            yield start, index, unicodedata.normalize("NFKC", text[start:index])
            start = index


def _starts_new_piece(piece: str, char: str) -> bool:
    if char.isascii():
        return True  # no canonical composition has an ASCII second character
    if unicodedata.combining(unicodedata.normalize("NFKD", char)[0]):
        return False  # may reorder or compose with anything since the last starter
    together = unicodedata.normalize("NFKC", piece + char)
    return together == unicodedata.normalize("NFKC", piece) + unicodedata.normalize("NFKC", char)
