"""Editing a golden JSONL file case by case, as ``ragsweep label`` does, without ever
overwriting what someone else wrote meanwhile.

The file stays a plain golden JSONL a person can edit by hand: a save replaces (or appends)
one line and leaves every other line byte for byte as it was; the whole file is written to a
temporary sibling and renamed into place (:func:`ragsweep.core.atomic.write_bytes_atomic`),
so a case is never half-written. Every change names the digest (sha256 of the bytes) of the
file it was made against: when the file on disk no longer has that digest (an edit in an
editor, a ``git pull``), the change is refused with :class:`GoldenConflictError` and
nothing is written. A file inside what ships with ragsweep (the demo golden set) is never
written (:func:`ragsweep.config.app.refuse_bundled_write`).
"""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsweep.config.app import refuse_bundled_write
from ragsweep.core.atomic import write_bytes_atomic
from ragsweep.core.errors import GoldenError
from ragsweep.data.corpus import Corpus
from ragsweep.data.quotes import quote_matches
from ragsweep.data.spans import trim_span

DRAFTS_SUFFIX = ".drafts.jsonl"
"""``golden.jsonl`` → ``golden.drafts.jsonl``: where ``ragsweep-golden draft`` writes by
default and where ``ragsweep label`` finds its review queue."""
DIGESTS_KEY = "doc_digests"
"""``metadata.doc_digests``: evidence doc id → :func:`text_digest` of its text when the
case was labelled (``ragsweep label``) or stamped (``ragsweep-golden stamp``)."""


class GoldenConflictError(GoldenError):
    """The golden file changed on disk since it was read: the change was not written."""


@dataclass(frozen=True)
class GoldenLine:
    """One non-blank line of a golden file: its 1-based ``line`` number, its text, and its
    JSON ``record`` (None when the line is not a JSON object)."""

    line: int
    text: str
    record: dict[str, Any] | None

    @property
    def case_id(self) -> str | None:
        """The record's ``id`` when it is a string."""
        value = None if self.record is None else self.record.get("id")
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class GoldenFile:
    """A golden file as read: its ``lines`` (all of them, blank ones included, each with
    its ``\r`` when the file has CRLF line ends), ``digest`` (sha256 of its bytes; ``""``
    when the file does not exist yet) and whether it starts with a UTF-8 ``bom``."""

    path: Path
    lines: tuple[str, ...]
    digest: str
    bom: bool = False

    def line_text(self, text: str, number: int | None = None) -> str:
        """``text`` as the line ``number`` (None: a new line) of this file: with a ``\r``
        when that line (a new line: the file's first line) ends with one."""
        model = self.lines[number - 1] if number else self.lines[0] if self.lines else ""
        return text + "\r" if model.endswith("\r") else text

    def records(self) -> list[GoldenLine]:
        """The non-blank lines, each with its JSON object when it is one."""
        return [
            GoldenLine(number, text, _record(text))
            for number, text in enumerate(self.lines, start=1)
            if text.strip()
        ]

    def find(self, case_id: str) -> GoldenLine | None:
        """The line holding the case ``case_id`` (None: no such case)."""
        return next((line for line in self.records() if line.case_id == case_id), None)


def evidence_item(corpus: Corpus, doc: str, start: int, end: int) -> dict[str, Any]:
    """A selection ``[start, end)`` of ``doc`` as a golden evidence item: trimmed, written
    as a quote, with ``occurrence`` when the quote occurs more than once (offsets when the
    quote cannot name this occurrence, e.g. inside an overlapping repeat)."""
    if doc not in corpus:
        raise GoldenError(f"unknown document {doc!r}")
    text = corpus.get(doc).text
    if not 0 <= start < end <= len(text):
        raise GoldenError(
            f"{doc}: selection [{start}, {end}) is outside the document (0-{len(text)})"
        )
    trimmed = trim_span(text, (start, end))
    if trimmed is None:
        raise GoldenError(f"{doc}: the selection [{start}, {end}) holds only whitespace")
    quote = text[trimmed[0] : trimmed[1]]
    matches = quote_matches(text, quote)
    if trimmed not in matches:
        return {"doc": doc, "start": trimmed[0], "end": trimmed[1]}
    if len(matches) == 1:
        return {"doc": doc, "quote": quote}
    return {"doc": doc, "quote": quote, "occurrence": matches.index(trimmed) + 1}


def text_digest(text: str) -> str:
    """A short digest of a document's text (16 hex digits of its sha256)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def evidence_digests(corpus: Corpus, evidence: Any) -> dict[str, str]:
    """``metadata.doc_digests`` for evidence items: each evidence document of ``corpus`` →
    :func:`text_digest` of its text now."""
    docs = [item.get("doc") for item in evidence if isinstance(item, dict)]
    return {
        doc: text_digest(corpus.get(doc).text)
        for doc in docs
        if isinstance(doc, str) and doc in corpus
    }


def changed_documents(corpus: Corpus, record: Mapping[str, Any]) -> list[str]:
    """Evidence documents whose text is not the text the case was labelled on (by the
    digests in its ``metadata.doc_digests``; none recorded, none found)."""
    metadata = record.get("metadata")
    digests = metadata.get(DIGESTS_KEY) if isinstance(metadata, dict) else None
    if not isinstance(digests, dict):
        return []
    return sorted(
        doc
        for doc, digest in digests.items()
        if doc in corpus and digest != text_digest(corpus.get(doc).text)
    )


def drafts_path(golden_path: Path) -> Path:
    """The default drafts file beside ``golden_path`` (:data:`DRAFTS_SUFFIX`)."""
    name = golden_path.name.removesuffix(".jsonl")
    return golden_path.with_name(name + DRAFTS_SUFFIX)


def file_digest(data: bytes) -> str:
    """sha256 of a file's bytes, the version a change is made against."""
    return hashlib.sha256(data).hexdigest()


def read_golden_file(path: Path) -> GoldenFile:
    """The file's lines and digest (a missing file reads as empty, digest ``""``)."""
    if not path.exists():
        return GoldenFile(path, (), "")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise GoldenError(f"{path}: cannot be read ({exc.strerror})") from None
    text = data.decode("utf-8-sig", "surrogateescape")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start another
    return GoldenFile(path, tuple(lines), file_digest(data), data.startswith(codecs.BOM_UTF8))


def case_line(record: Mapping[str, Any]) -> str:
    """One golden line: the record as compact JSON, non-ASCII characters kept as written."""
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": "))


def save_case(
    path: Path, expected_digest: str, record: Mapping[str, Any], replaces: str | None
) -> str:
    """Write ``record`` in place of the case ``replaces`` (None: append it); return the
    file's new digest. Refuses (GoldenConflictError) when the file is not the version
    ``expected_digest`` names, or when the record's id is another case's."""
    current = _current(path, expected_digest)
    new_id = record.get("id")
    clash = current.find(new_id) if isinstance(new_id, str) else None
    if clash is not None and new_id != replaces:
        raise GoldenError(f"{path}:{clash.line}: a case with id {new_id!r} exists already")
    lines = list(current.lines)
    if replaces is None:
        lines.append(current.line_text(case_line(record)))
    else:
        number = _line_of(current, replaces)
        lines[number - 1] = current.line_text(case_line(record), number)
    return _write(path, lines, current.bom)


def append_cases(path: Path, expected_digest: str, records: list[dict[str, Any]]) -> str:
    """Append ``records`` as lines in one atomic write; return the file's new digest (as
    :func:`save_case`: refused when the file is not the version ``expected_digest`` names)."""
    current = _current(path, expected_digest)
    added = [current.line_text(case_line(record)) for record in records]
    return _write(path, [*current.lines, *added], current.bom)


def replace_lines(
    path: Path, expected_digest: str, records: Mapping[int, Mapping[str, Any]]
) -> str:
    """Write each record in place of its 1-based line number, in one atomic write, every
    other line kept byte for byte (a replaced line keeps its ``\r``, the file its BOM);
    return the file's new digest (as :func:`save_case`)."""
    current = _current(path, expected_digest)
    lines = list(current.lines)
    for number, record in records.items():
        lines[number - 1] = current.line_text(case_line(record), number)
    return _write(path, lines, current.bom)


def delete_case(path: Path, expected_digest: str, case_id: str) -> str:
    """Remove the case ``case_id``'s line; return the file's new digest (as :func:`save_case`)."""
    current = _current(path, expected_digest)
    lines = list(current.lines)
    del lines[_line_of(current, case_id) - 1]
    return _write(path, lines, current.bom)


def _current(path: Path, expected_digest: str) -> GoldenFile:
    current = read_golden_file(path)
    if current.digest != expected_digest:
        raise GoldenConflictError(
            f"{path} changed on disk since it was loaded (an edit elsewhere?): nothing was "
            "written, so that edit is kept; reload to see it, then make the change again"
        )
    return current


def _line_of(current: GoldenFile, case_id: str) -> int:
    found = current.find(case_id)
    if found is None:
        raise GoldenError(f"{current.path}: no case with id {case_id!r}")
    return found.line


def _write(path: Path, lines: list[str], bom: bool) -> str:
    refuse_bundled_write(path, "name a golden file of your own.")
    data = ("".join(line + "\n" for line in lines)).encode("utf-8", "surrogateescape")
    data = codecs.BOM_UTF8 + data if bom else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
    except OSError as exc:
        raise GoldenError(
            f"{path}: cannot write the golden file ({exc.strerror or exc}); nothing was "
            "changed. Make its folder writable (or free space on its disk) and try again, or "
            "name a golden file elsewhere"
        ) from exc
    return file_digest(data)


def _record(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
