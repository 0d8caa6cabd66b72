"""Resolving an evidence quote to character offsets in its document's text.

A golden case may give its evidence as a quote instead of offsets (docs/formats.md).
:func:`resolve_quote` finds it exactly first, then tolerant of whitespace and Unicode
compatibility (NFKC) differences, mapping a tolerant match back to source offsets.
"""

from __future__ import annotations

import functools
import unicodedata
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

_QUOTE_PREVIEW_CHARS = 60
_MATCHES_SHOWN = 3


@dataclass(frozen=True)
class _NormalizedText:
    """A NFKC, whitespace-collapsed copy of a source text with a map back to the source.

    Normalized character ``i`` comes from source characters
    ``[source_start[i], source_end[i])``.
    """

    text: str
    source_start: array[int]
    source_end: array[int]

    def source_span(self, start: int, end: int) -> tuple[int, int]:
        """Source offsets covering normalized characters ``[start, end)``."""
        return self.source_start[start], self.source_end[end - 1]


def resolve_quote(text: str, quote: str, occurrence: int | None = None) -> tuple[int, int]:
    """Offsets ``(start, end)`` of ``quote`` in ``text`` (code points, end-exclusive).

    Exact matches are tried first; if there are none, a tolerant match that ignores
    whitespace differences and Unicode compatibility differences (NFKC) is used and mapped
    back to source offsets. ``occurrence`` (1-based) picks one of several matches; without
    it a quote must match exactly once. Raises ValueError with a short reason.
    """
    if not quote.strip():
        raise ValueError("quote is empty")
    if occurrence is not None and occurrence < 1:
        raise ValueError(f"occurrence={occurrence} must be >= 1 (1 = first occurrence)")
    matches = _exact_matches(text, quote) or _tolerant_matches(text, quote)
    preview = _preview(quote)
    if not matches:
        raise ValueError(f"quote {preview} not found (exact, or ignoring whitespace and NFKC)")
    if occurrence is None:
        if len(matches) > 1:
            raise ValueError(
                f"quote {preview} occurs {len(matches)} times (at {_describe(matches)}); "
                f'add "occurrence": 1..{len(matches)} to choose one'
            )
        return matches[0]
    if occurrence > len(matches):
        raise ValueError(
            f"occurrence={occurrence} but quote {preview} occurs only {len(matches)} time(s)"
        )
    return matches[occurrence - 1]


def _exact_matches(text: str, quote: str) -> list[tuple[int, int]]:
    """All non-overlapping exact occurrences, left to right."""
    matches = []
    position = text.find(quote)
    while position != -1:
        matches.append((position, position + len(quote)))
        position = text.find(quote, position + len(quote))
    return matches


def _tolerant_matches(text: str, quote: str) -> list[tuple[int, int]]:
    """Non-overlapping matches of the normalized quote in the normalized text, as source
    offsets (distinct, left to right)."""
    needle = _collapse_whitespace(unicodedata.normalize("NFKC", quote))
    view = _normalized_view(text)
    matches: list[tuple[int, int]] = []
    position = view.text.find(needle)
    while position != -1:
        span = view.source_span(position, position + len(needle))
        if span not in matches:  # one source char can expand to several normalized ones
            matches.append(span)
        position = view.text.find(needle, position + len(needle))
    return matches


def _collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


@functools.lru_cache(maxsize=16)
def _normalized_view(text: str) -> _NormalizedText:
    """NFKC ``text`` piece by piece, collapse whitespace runs to one space, keep the map."""
    chars: list[str] = []
    source_start: array[int] = array("q")
    source_end: array[int] = array("q")
    for start, end, piece in _nfkc_pieces(text):
        for char in piece:
            if char.isspace() and chars and chars[-1] == " ":
                source_end[-1] = end  # extend the current whitespace run
                continue
            chars.append(" " if char.isspace() else char)
            source_start.append(start)
            source_end.append(end)
    return _NormalizedText("".join(chars), source_start, source_end)


def _nfkc_pieces(text: str) -> Iterator[tuple[int, int, str]]:
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


def _preview(quote: str) -> str:
    if len(quote) > _QUOTE_PREVIEW_CHARS:
        quote = quote[: _QUOTE_PREVIEW_CHARS - 1] + "…"
    return repr(quote)


def _describe(matches: Sequence[tuple[int, int]]) -> str:
    shown = ", ".join(f"{start}-{end}" for start, end in matches[:_MATCHES_SHOWN])
    return shown + (", …" if len(matches) > _MATCHES_SHOWN else "")
