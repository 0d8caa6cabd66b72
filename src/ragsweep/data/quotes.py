"""Resolving an evidence quote to character offsets in its document's text.

A golden case may give its evidence as a quote instead of offsets (docs/formats.md, "How
quotes are matched"). :func:`resolve_quote` finds it exactly first; then tolerant of
whitespace and Unicode compatibility (NFKC) differences; then folded (typographic quotes and
dashes as ASCII, Markdown inline markup and invisible characters ignored). A tolerant or
folded match is mapped back to source offsets. A quote that is not found gets the closest
passage of the document in its error (:mod:`ragsweep.data.closest`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from ragsweep.data.closest import describe_closest
from ragsweep.data.folding import NormalizedText, folded, folded_view, normalized_view

_QUOTE_PREVIEW_CHARS = 60
_MATCHES_SHOWN = 3


def resolve_quote(text: str, quote: str, occurrence: int | None = None) -> tuple[int, int]:
    """Offsets ``(start, end)`` of ``quote`` in ``text`` (code points, end-exclusive).

    Exact matches are tried first; if there are none, a tolerant match that ignores
    whitespace differences and Unicode compatibility differences (NFKC); if there are none
    either, a folded match (:func:`ragsweep.data.folding.folded_view`). A tolerant or folded
    match is mapped back to source offsets. ``occurrence`` (1-based) picks one of several
    matches of the first kind that has any; without it a quote must match exactly once.
    Raises ValueError with a short reason (for a quote not found: the closest passage).
    """
    if not quote.strip():
        raise ValueError("quote is empty")
    if occurrence is not None and occurrence < 1:
        raise ValueError(f"occurrence={occurrence} must be >= 1 (1 = first occurrence)")
    matches = quote_matches(text, quote)
    preview = _preview(quote)
    if not matches:
        raise ValueError(
            f"quote {preview} not found (exact, ignoring whitespace and NFKC, or folded: "
            f"docs/formats.md#how-quotes-are-matched); {describe_closest(text, quote)}"
        )
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


def quote_matches(text: str, quote: str) -> list[tuple[int, int]]:
    """Every match of ``quote`` of the first kind that has any (exact, tolerant, folded),
    left to right, as source offsets; ``occurrence`` N of :func:`resolve_quote` is the Nth."""
    return (
        _exact_matches(text, quote)
        or _tolerant_matches(text, quote)
        or _folded_matches(text, quote)
    )


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
    return _view_matches(normalized_view(text), needle)


def _folded_matches(text: str, quote: str) -> list[tuple[int, int]]:
    """Non-overlapping matches of the folded quote in the folded text, as source offsets."""
    needle = folded(quote).text.strip(" ")
    return _view_matches(folded_view(text), needle) if needle else []


def _view_matches(view: NormalizedText, needle: str) -> list[tuple[int, int]]:
    """Non-overlapping occurrences of ``needle`` in ``view``, as distinct source spans."""
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


def _preview(quote: str) -> str:
    if len(quote) > _QUOTE_PREVIEW_CHARS:
        quote = quote[: _QUOTE_PREVIEW_CHARS - 1] + "…"
    return repr(quote)


def _describe(matches: Sequence[tuple[int, int]]) -> str:
    shown = ", ".join(f"{start}-{end}" for start, end in matches[:_MATCHES_SHOWN])
    return shown + (", …" if len(matches) > _MATCHES_SHOWN else "")
