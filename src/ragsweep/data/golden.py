"""The golden question set: questions labelled with evidence spans in the corpus.

A golden set is a JSONL file, one case per line (format: docs/formats.md). Evidence is a
character span ``[start, end)`` in a document's text (code points, 0-based, end-exclusive),
never a chunk id, so labels stay valid when the chunking changes. Evidence may be written
as a quote, which :func:`resolve_quote` turns into offsets, first exactly and then tolerant
of whitespace and Unicode (NFKC) differences.

:func:`load_golden` validates the whole file against the corpus before any index is built;
every problem is reported as ``<file>:<line>: case '<id>': ...`` (the id when it is known),
all of them in one :class:`GoldenError`.
"""

from __future__ import annotations

import codecs
import difflib
import functools
import hashlib
import json
import re
import unicodedata
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsweep.chunk.chunkers import trim_span
from ragsweep.config.schema import SPLITS, GoldenConfig
from ragsweep.core.errors import GoldenError, ProblemList
from ragsweep.core.lone_surrogates import lone_surrogate
from ragsweep.data.corpus import Corpus, jsonl_lines

CASE_FIELDS = (
    "id",
    "question",
    "type",
    "answerable",
    "split",
    "evidence",
    "scope",
    "notes",
    "metadata",
)
QUOTE_FIELDS = ("doc", "quote", "occurrence")
OFFSET_FIELDS = ("doc", "start", "end")
DEFAULT_TYPE = "untyped"

_QUOTE_PREVIEW_CHARS = 60
_MATCHES_SHOWN = 3


@dataclass(frozen=True)
class EvidenceSpan:
    """Characters ``[start, end)`` of document ``doc`` (code points into ``Document.text``)."""

    doc: str
    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end:
            raise ValueError(f"EvidenceSpan needs 0 <= start < end, got {self.start}, {self.end}")

    @property
    def length(self) -> int:
        """Span length in characters."""
        return self.end - self.start


@dataclass(frozen=True)
class GoldenCase:
    """One labelled question.

    ``evidence`` is empty exactly when the case is not answerable. ``scope`` lists the doc
    ids retrieval is restricted to for this case (None: the whole corpus). ``line`` is the
    1-based line of the case in the golden file.
    """

    id: str
    question: str
    type: str
    answerable: bool
    split: str
    evidence: tuple[EvidenceSpan, ...]
    scope: tuple[str, ...] | None
    line: int


@dataclass(frozen=True)
class GoldenSet:
    """All cases of a golden file in file order; ``digest`` is the sha256 of its bytes."""

    cases: tuple[GoldenCase, ...]
    path: str
    digest: str

    def for_split(self, split: str) -> tuple[GoldenCase, ...]:
        """The cases of ``split`` (``tuning`` or ``holdout``), in file order."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        return tuple(case for case in self.cases if case.split == split)

    @property
    def types(self) -> tuple[str, ...]:
        """The distinct question types, sorted."""
        return tuple(sorted({case.type for case in self.cases}))


def assign_split(case_id: str, holdout_fraction: float) -> str:
    """Deterministic split for a case without one: ``holdout`` for about ``holdout_fraction``
    of ids, chosen by the first 64 bits of sha256(id), so the same on every machine and run."""
    if not 0.0 <= holdout_fraction <= 1.0:
        raise ValueError(f"holdout_fraction={holdout_fraction} must be in [0, 1]")
    position = int(hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:16], 16) / 2**64
    return "holdout" if position < holdout_fraction else "tuning"


# --- quote resolution -------------------------------------------------------------------


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


# --- loading ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Where:
    """Where a golden record sits, for error messages: ``<file>:<line>: case '<id>': ...``."""

    path: str
    line: int
    case_id: str | None = None

    def error(self, message: str) -> GoldenError:
        case = f" case {self.case_id!r}:" if self.case_id is not None else ""
        return GoldenError(f"{self.path}:{self.line}:{case} {message}")


def load_golden(cfg: GoldenConfig, corpus: Corpus) -> GoldenSet:
    """Read and validate the golden set at ``cfg.path`` against ``corpus``.

    Quotes are resolved to offsets, missing splits are assigned with
    :func:`assign_split`, and every case is checked; all problems are raised together as
    one GoldenError (the first :data:`~ragsweep.core.errors.MAX_REPORTED_PROBLEMS` listed, the
    rest counted).
    """
    path = Path(cfg.path)
    data = _read_bytes(path)
    digest = hashlib.sha256(data).hexdigest()
    memo_key = (str(path), digest, corpus.content_hash(), cfg.holdout_fraction)
    if memo_key not in _LOADED:
        _LOADED.clear()  # one golden set per process is the common case; keep memory flat
        _LOADED[memo_key] = _parse_golden(path, data, digest, cfg.holdout_fraction, corpus)
    return _LOADED[memo_key]


# A sweep evaluates many configurations of one golden set in one process: parse it once.
# The key holds the file's digest and the corpus hash, so an edited file or corpus is
# parsed (and validated) again.
_LOADED: dict[tuple[str, str, str, float], GoldenSet] = {}


def _parse_golden(
    path: Path, data: bytes, digest: str, holdout_fraction: float, corpus: Corpus
) -> GoldenSet:
    """The golden set in ``data`` (the file's bytes; ``digest``: their sha256).

    Every line is checked, whatever earlier lines hold: all problems are collected and
    raised together (:class:`~ragsweep.core.errors.ProblemList`), one per bad line.
    """
    problems = ProblemList(str(path), GoldenError)
    cases: list[GoldenCase] = []
    first_line: dict[str, int] = {}
    for line_no, line in enumerate(_lines(data), start=1):
        where = _Where(str(path), line_no)
        try:
            record = _record(line, where)
            if record is None:
                continue
            _check_unique_id(record, where, first_line)
            cases.append(_parse_case(record, where, holdout_fraction, corpus))
        except GoldenError as exc:
            problems.add(str(exc))
    problems.raise_if_any()
    if not cases:
        raise GoldenError(f"{path}: golden set contains no cases")
    return GoldenSet(cases=tuple(cases), path=str(path), digest=digest)


def _check_unique_id(record: Any, where: _Where, first_line: dict[str, int]) -> None:
    """Record the line of the case's id; a second case with the same id is an error."""
    case_id = record.get("id") if isinstance(record, dict) else None
    if not isinstance(case_id, str) or not case_id.strip():
        return  # reported by _parse_case
    if case_id in first_line:
        raise _Where(where.path, where.line, case_id).error(
            f"duplicate id (first defined on line {first_line[case_id]})"
        )
    first_line[case_id] = where.line


def _read_bytes(path: Path) -> bytes:
    if not path.is_file():
        reason = "is not a file" if path.exists() else "does not exist"
        raise GoldenError(f"{path}: golden set {reason} (golden.path)")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise GoldenError(f"{path}: cannot be read ({exc.strerror})") from None


def _lines(data: bytes) -> list[str]:
    """The file's lines (:func:`~ragsweep.data.corpus.jsonl_lines`: ``\\n``, ``\\r\\n`` or a lone
    ``\\r`` ends a line; U+2028 and U+0085 inside JSON strings do not). Bytes that are not
    UTF-8 are kept as lone surrogates, so the line holding them can be reported."""
    return jsonl_lines(data.removeprefix(codecs.BOM_UTF8).decode("utf-8", "surrogateescape"))


_UNDECODED = re.compile("[\udc80-\udcff]")
"""A byte that was not UTF-8, as :func:`_lines` keeps it (``surrogateescape``)."""


def _record(line: str, where: _Where) -> Any:
    """The JSON value on ``line``; None for a blank line."""
    bad = _UNDECODED.search(line)  # in C: a golden line can be thousands of characters
    if bad is not None:
        raise where.error(
            f"not valid UTF-8 (byte 0x{ord(bad.group()) - 0xDC00:02x} at column {bad.start() + 1})"
        )
    if not line.strip():
        return None
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise where.error(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    problem = lone_surrogate(line, value)
    if problem is not None:
        raise where.error(problem)
    return value


def _parse_case(record: Any, where: _Where, holdout_fraction: float, corpus: Corpus) -> GoldenCase:
    if not isinstance(record, dict):
        raise where.error(f"expected a JSON object, got {type(record).__name__}")
    raw_id = record.get("id")
    if isinstance(raw_id, str) and raw_id.strip():
        where = _Where(where.path, where.line, raw_id)
    _reject_unknown_fields(record, CASE_FIELDS, "field", where)
    case_id = _required_text(record, "id", where)
    question = _required_text(record, "question", where)
    case_type = _optional_text(record, "type", DEFAULT_TYPE, where)
    answerable = _optional_bool(record, "answerable", True, where)
    split = _parse_split(record, case_id, holdout_fraction, where)
    scope = _parse_scope(record.get("scope"), where, corpus)
    evidence = _parse_evidence(record.get("evidence", []), where, corpus, scope)
    if answerable and not evidence:
        raise where.error('"answerable": true needs at least one "evidence" item')
    if not answerable and evidence:
        raise where.error('"answerable": false must not carry "evidence"')
    return GoldenCase(
        id=case_id,
        question=question,
        type=case_type,
        answerable=answerable,
        split=split,
        evidence=evidence,
        scope=scope,
        line=where.line,
    )


def _reject_unknown_fields(
    record: dict[str, Any], allowed: Sequence[str], what: str, where: _Where
) -> None:
    for name in record:
        if name not in allowed:
            hint = _did_you_mean(name, allowed)
            raise where.error(f"unknown {what} {name!r} (allowed: {', '.join(allowed)}){hint}")


def _did_you_mean(name: str, choices: Sequence[str]) -> str:
    """A hint naming the closest of ``choices`` (compared case-insensitively), or ``""``."""
    by_lower = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return f"; did you mean {by_lower[close[0]]!r}?" if close else ""


def _required_text(record: dict[str, Any], key: str, where: _Where) -> str:
    if key not in record:
        raise where.error(f"missing required field {key!r}")
    value = record[key]
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"{key!r} must be a non-empty string, got {value!r}")
    return value


def _optional_text(record: dict[str, Any], key: str, default: str, where: _Where) -> str:
    return _required_text(record, key, where) if key in record else default


def _optional_bool(record: dict[str, Any], key: str, default: bool, where: _Where) -> bool:
    value = record.get(key, default)
    if not isinstance(value, bool):
        raise where.error(f"{key!r} must be true or false, got {value!r}")
    return value


def _parse_split(
    record: dict[str, Any], case_id: str, holdout_fraction: float, where: _Where
) -> str:
    if "split" not in record:
        return assign_split(case_id, holdout_fraction)
    split = record["split"]
    if split not in SPLITS:
        raise where.error(f"'split' must be one of {', '.join(SPLITS)} (or omitted), got {split!r}")
    return str(split)


def _parse_scope(value: Any, where: _Where, corpus: Corpus) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise where.error(
            f"'scope' must be a non-empty list of doc ids (omit it for the whole corpus), "
            f"got {value!r}"
        )
    doc_ids = (_checked_doc_id(doc_id, "scope", where, corpus) for doc_id in value)
    return tuple(dict.fromkeys(doc_ids))


def _checked_doc_id(doc_id: Any, what: str, where: _Where, corpus: Corpus) -> str:
    """``doc_id`` if it names a corpus document, else an error with the closest id."""
    if not isinstance(doc_id, str) or not doc_id:
        raise where.error(f"{what}: doc id must be a non-empty string, got {doc_id!r}")
    if doc_id not in corpus:
        hint = _did_you_mean(doc_id, list(corpus.ids))
        raise where.error(f"{what}: unknown doc {doc_id!r} (not in corpus {corpus.source}){hint}")
    return doc_id


def _parse_evidence(
    value: Any, where: _Where, corpus: Corpus, scope: tuple[str, ...] | None
) -> tuple[EvidenceSpan, ...]:
    if not isinstance(value, list):
        raise where.error(f"'evidence' must be a list, got {type(value).__name__}")
    spans = (
        _parse_evidence_item(item, f"evidence[{index}]", where, corpus, scope)
        for index, item in enumerate(value)
    )
    return tuple(dict.fromkeys(spans))  # drop duplicate spans, keep first-seen order


def _parse_evidence_item(
    item: Any, what: str, where: _Where, corpus: Corpus, scope: tuple[str, ...] | None
) -> EvidenceSpan:
    if not isinstance(item, dict):
        raise where.error(f"{what} must be an object, got {type(item).__name__}")
    has_quote = "quote" in item or "occurrence" in item
    has_offsets = "start" in item or "end" in item
    if not has_quote and not has_offsets:
        raise where.error(f'{what} needs "quote" (+ "occurrence") or "start" and "end"')
    if has_quote and has_offsets:
        raise where.error(f'{what}: use either "quote" (+ "occurrence") or "start"/"end", not both')
    allowed = OFFSET_FIELDS if has_offsets else QUOTE_FIELDS
    _reject_unknown_fields(item, allowed, f"{what} field", where)
    doc_id = _checked_doc_id(item.get("doc"), what, where, corpus)
    if scope is not None and doc_id not in scope:
        raise where.error(
            f"{what}: doc {doc_id!r} is outside the case's scope {list(scope)}, "
            "so it could never be retrieved"
        )
    text = corpus.get(doc_id).text
    if has_offsets:
        start, end = _checked_offsets(item, text, f"{what} ({doc_id!r})", where)
    else:
        start, end = _resolved_quote(item, text, f"{what} ({doc_id!r})", where)
    start, end = _trimmed(text, start, end, f"{what} ({doc_id!r})", where)
    return EvidenceSpan(doc=doc_id, start=start, end=end)


def _trimmed(text: str, start: int, end: int, what: str, where: _Where) -> tuple[int, int]:
    """The span without leading/trailing whitespace (:func:`~ragsweep.chunk.chunkers.trim_span`).

    Chunks are trimmed the same way, so a span ending in a newline would otherwise stick out
    of every chunk that holds its text and never be hit at ``min_span_overlap=1.0``.
    """
    trimmed = trim_span(text, (start, end))
    if trimmed is None:
        raise where.error(f"{what}: the span [{start}, {end}) holds only whitespace")
    return trimmed


def _checked_offsets(item: dict[str, Any], text: str, what: str, where: _Where) -> tuple[int, int]:
    start = _integer_field(item, "start", what, where)
    end = _integer_field(item, "end", what, where)
    if not 0 <= start < end <= len(text):
        raise where.error(
            f"{what}: offsets start={start}, end={end} must satisfy "
            f"0 <= start < end <= {len(text)} (the document length)"
        )
    return start, end


def _integer_field(item: dict[str, Any], key: str, what: str, where: _Where) -> int:
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(f"{what}: {key!r} must be an integer, got {value!r}")
    return value


def _resolved_quote(item: dict[str, Any], text: str, what: str, where: _Where) -> tuple[int, int]:
    quote, occurrence = item.get("quote"), item.get("occurrence")
    if not isinstance(quote, str):
        raise where.error(f"{what}: 'quote' must be a string, got {quote!r}")
    if occurrence is not None and (isinstance(occurrence, bool) or not isinstance(occurrence, int)):
        raise where.error(f"{what}: 'occurrence' must be an integer >= 1, got {occurrence!r}")
    try:
        return resolve_quote(text, quote, occurrence)
    except ValueError as exc:
        raise where.error(f"{what}: {exc}") from None
