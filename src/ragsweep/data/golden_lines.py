"""Reading and validating the lines of a golden JSONL file, field by field.

Each line is decoded to a JSON record and each field checked against the corpus, every
problem raised as a :class:`~ragsweep.core.errors.GoldenError` that says where it is
(:class:`Where`: ``<file>:<line>: case '<id>': ...``). Evidence items are resolved to trimmed
``(doc, start, end)`` character spans: quotes by :func:`ragsweep.data.quotes.resolve_quote`,
both forms trimmed by :func:`ragsweep.data.spans.trim_span`. How the fields make a case, and a
file a golden set, is :mod:`ragsweep.data.golden`.
"""

from __future__ import annotations

import codecs
import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragsweep.core.errors import GoldenError
from ragsweep.core.lone_surrogates import lone_surrogate
from ragsweep.core.names import SPLITS
from ragsweep.data.corpus import Corpus, jsonl_lines
from ragsweep.data.parsers import PAGE_STARTS
from ragsweep.data.quotes import resolve_quote
from ragsweep.data.spans import trim_span
from ragsweep.data.splits import assign_split

QUOTE_FIELDS = ("doc", "quote", "occurrence", "page")
OFFSET_FIELDS = ("doc", "start", "end", "parser")

EvidenceItem = tuple[str, int, int]
"""``(doc, start, end)``: a validated, trimmed evidence span (code points, end-exclusive)."""


@dataclass(frozen=True)
class Where:
    """Where a golden record sits, for error messages: ``<file>:<line>: case '<id>': ...``."""

    path: str
    line: int
    case_id: str | None = None

    def error(self, message: str) -> GoldenError:
        case = f" case {self.case_id!r}:" if self.case_id is not None else ""
        return GoldenError(f"{self.path}:{self.line}:{case} {message}")


def golden_lines(data: bytes) -> list[str]:
    """The file's lines (:func:`~ragsweep.data.corpus.jsonl_lines`: ``\\n``, ``\\r\\n`` or a lone
    ``\\r`` ends a line; U+2028 and U+0085 inside JSON strings do not). Bytes that are not
    UTF-8 are kept as lone surrogates, so the line holding them can be reported."""
    return jsonl_lines(data.removeprefix(codecs.BOM_UTF8).decode("utf-8", "surrogateescape"))


_UNDECODED = re.compile("[\udc80-\udcff]")
"""A byte that was not UTF-8, as :func:`golden_lines` keeps it (``surrogateescape``)."""


def read_record(line: str, where: Where) -> Any:
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


def check_unique_id(record: Any, where: Where, first_line: dict[str, int]) -> None:
    """Record the line of the case's id; a second case with the same id is an error."""
    case_id = record.get("id") if isinstance(record, dict) else None
    if not isinstance(case_id, str) or not case_id.strip():
        return  # reported by ragsweep.data.golden.parse_case
    if case_id in first_line:
        raise Where(where.path, where.line, case_id).error(
            f"duplicate id (first defined on line {first_line[case_id]})"
        )
    first_line[case_id] = where.line


def reject_unknown_fields(
    record: dict[str, Any], allowed: Sequence[str], what: str, where: Where
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


def required_text(record: dict[str, Any], key: str, where: Where) -> str:
    if key not in record:
        raise where.error(f"missing required field {key!r}")
    value = record[key]
    if not isinstance(value, str) or not value.strip():
        raise where.error(f"{key!r} must be a non-empty string, got {value!r}")
    return value


def optional_text(record: dict[str, Any], key: str, default: str, where: Where) -> str:
    return required_text(record, key, where) if key in record else default


def optional_bool(record: dict[str, Any], key: str, default: bool, where: Where) -> bool:
    value = record.get(key, default)
    if not isinstance(value, bool):
        raise where.error(f"{key!r} must be true or false, got {value!r}")
    return value


def parse_split(record: dict[str, Any], case_id: str, holdout_fraction: float, where: Where) -> str:
    """The record's ``split``, or :func:`~ragsweep.data.splits.assign_split`'s without one."""
    if "split" not in record:
        return assign_split(case_id, holdout_fraction)
    split = record["split"]
    if split not in SPLITS:
        raise where.error(f"'split' must be one of {', '.join(SPLITS)} (or omitted), got {split!r}")
    return str(split)


def parse_scope(value: Any, where: Where, corpus: Corpus) -> tuple[str, ...] | None:
    """The doc ids of a ``scope`` field (None: the whole corpus), duplicates dropped."""
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise where.error(
            f"'scope' must be a non-empty list of doc ids (omit it for the whole corpus), "
            f"got {value!r}"
        )
    doc_ids = (_checked_doc_id(doc_id, "scope", where, corpus) for doc_id in value)
    return tuple(dict.fromkeys(doc_ids))


def _checked_doc_id(doc_id: Any, what: str, where: Where, corpus: Corpus) -> str:
    """``doc_id`` if it names a corpus document, else an error with the closest id."""
    if not isinstance(doc_id, str) or not doc_id:
        raise where.error(f"{what}: doc id must be a non-empty string, got {doc_id!r}")
    if doc_id not in corpus:
        hint = _did_you_mean(doc_id, list(corpus.ids))
        raise where.error(f"{what}: unknown doc {doc_id!r} (not in corpus {corpus.source}){hint}")
    return doc_id


def parse_evidence(
    value: Any, where: Where, corpus: Corpus, scope: tuple[str, ...] | None
) -> tuple[EvidenceItem, ...]:
    """The spans of an ``evidence`` field, duplicates dropped (first-seen order kept)."""
    if not isinstance(value, list):
        raise where.error(f"'evidence' must be a list, got {type(value).__name__}")
    spans = (
        _parse_evidence_item(item, f"evidence[{index}]", where, corpus, scope)
        for index, item in enumerate(value)
    )
    return tuple(dict.fromkeys(spans))


def _parse_evidence_item(
    item: Any, what: str, where: Where, corpus: Corpus, scope: tuple[str, ...] | None
) -> EvidenceItem:
    if not isinstance(item, dict):
        raise where.error(f"{what} must be an object, got {type(item).__name__}")
    has_quote = "quote" in item or "occurrence" in item
    has_offsets = "start" in item or "end" in item
    if not has_quote and not has_offsets:
        raise where.error(f'{what} needs "quote" (+ "occurrence") or "start" and "end"')
    if has_quote and has_offsets:
        raise where.error(f'{what}: use either "quote" (+ "occurrence") or "start"/"end", not both')
    allowed = OFFSET_FIELDS if has_offsets else QUOTE_FIELDS
    reject_unknown_fields(item, allowed, f"{what} field", where)
    doc_id = _checked_doc_id(item.get("doc"), what, where, corpus)
    if scope is not None and doc_id not in scope:
        raise where.error(
            f"{what}: doc {doc_id!r} is outside the case's scope {list(scope)}, "
            "so it could never be retrieved"
        )
    document = corpus.get(doc_id)
    text = document.text
    if has_offsets:
        _check_parser(item.get("parser"), document.metadata.get("parser"), f"{what}", where)
        start, end = _checked_offsets(item, text, f"{what} ({doc_id!r})", where)
    else:
        first, last = _page_range(item, document.metadata, len(text), what, where)
        start, end = _resolved_quote(item, text[first:last], f"{what} ({doc_id!r})", where)
        start, end = start + first, end + first
    start, end = _trimmed(text, start, end, f"{what} ({doc_id!r})", where)
    return doc_id, start, end


def _trimmed(text: str, start: int, end: int, what: str, where: Where) -> tuple[int, int]:
    """The span without leading/trailing whitespace (:func:`~ragsweep.data.spans.trim_span`).

    Chunks are trimmed the same way, so a span ending in a newline would otherwise stick out
    of every chunk that holds its text and never be hit at ``min_span_overlap=1.0``.
    """
    trimmed = trim_span(text, (start, end))
    if trimmed is None:
        raise where.error(f"{what}: the span [{start}, {end}) holds only whitespace")
    return trimmed


def _checked_offsets(item: dict[str, Any], text: str, what: str, where: Where) -> tuple[int, int]:
    start = _integer_field(item, "start", what, where)
    end = _integer_field(item, "end", what, where)
    if not 0 <= start < end <= len(text):
        raise where.error(
            f"{what}: offsets start={start}, end={end} must satisfy "
            f"0 <= start < end <= {len(text)} (the document length)"
        )
    return start, end


def _check_parser(written: Any, reading: Any, what: str, where: Where) -> None:
    """Offsets are positions in one parser's text: refused under another parser."""
    if written != reading:
        raise where.error(
            f"{what}: offsets refer to the text of parser {written or 'none (plain text)'!s}, "
            f"but the corpus reads this document with {reading or 'none (plain text)'!s}; "
            'give the evidence as a "quote" instead: quotes are resolved on each parser\'s '
            'text (or set "parser" to the parser the offsets were taken from)'
        )


def _page_range(
    item: dict[str, Any], metadata: Any, length: int, what: str, where: Where
) -> tuple[int, int]:
    """The offsets of the page a quote names (``"page"``, 1-based), else the whole text."""
    page = item.get("page")
    if page is None:
        return 0, length
    starts = metadata.get(PAGE_STARTS) or []
    if isinstance(page, bool) or not isinstance(page, int) or not 1 <= page <= len(starts):
        pages = f"1..{len(starts)}" if starts else "none: the document has no pages"
        raise where.error(f"{what}: 'page' must be a page of the document ({pages}), got {page!r}")
    end = starts[page] if page < len(starts) else length
    return starts[page - 1], end


def _integer_field(item: dict[str, Any], key: str, what: str, where: Where) -> int:
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(f"{what}: {key!r} must be an integer, got {value!r}")
    return value


def _resolved_quote(item: dict[str, Any], text: str, what: str, where: Where) -> tuple[int, int]:
    quote, occurrence = item.get("quote"), item.get("occurrence")
    if not isinstance(quote, str):
        raise where.error(f"{what}: 'quote' must be a string, got {quote!r}")
    if occurrence is not None and (isinstance(occurrence, bool) or not isinstance(occurrence, int)):
        raise where.error(f"{what}: 'occurrence' must be an integer >= 1, got {occurrence!r}")
    try:
        return resolve_quote(text, quote, occurrence)
    except ValueError as exc:
        raise where.error(f"{what}: {exc}") from None
