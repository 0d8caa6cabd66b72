"""Corpus loading: a directory of text/Markdown files or a JSONL file of documents.

Document ids are stable: the POSIX path relative to the corpus directory, or the ``id``
field of a JSONL line. Text is kept exactly as read (UTF-8, newlines untouched) because
evidence spans and chunk offsets are character offsets into it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsweep.config import CorpusConfig
from ragsweep.errors import CorpusError
from ragsweep.hashing import sha256_parts


@dataclass(frozen=True)
class Document:
    """One source document. Offsets anywhere in ragsweep index into ``text`` (code points)."""

    id: str
    text: str
    title: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Corpus:
    """All documents of a corpus, in a deterministic order (sorted by id)."""

    documents: tuple[Document, ...]
    source: str

    @functools.cached_property
    def _by_id(self) -> dict[str, Document]:
        return {d.id: d for d in self.documents}

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._by_id

    def get(self, doc_id: str) -> Document:
        return self._by_id[doc_id]

    @property
    def n_chars(self) -> int:
        """Total characters (code points) over all documents."""
        return sum(len(d.text) for d in self.documents)

    def content_hash(self) -> str:
        """sha256 over every (id, text) pair in id order. Titles and metadata are not hashed:
        they do not reach the index."""
        return self._content_hash

    @functools.cached_property
    def _content_hash(self) -> str:
        # cached_property writes the instance __dict__ directly, so it works on a frozen
        # dataclass without object.__setattr__
        return sha256_parts(p for d in self.documents for p in (d.id, d.text))


def load_corpus(cfg: CorpusConfig) -> Corpus:
    """Read the corpus described by ``cfg``; raise CorpusError naming the file on failure."""
    path = Path(cfg.path)
    if path.is_dir():
        documents = list(_read_directory(path, cfg.extensions))
    elif path.is_file() and path.suffix.lower() == ".jsonl":
        documents = list(_read_jsonl(path))
    elif path.exists():
        raise CorpusError(f"corpus.path={path}: expected a directory or a .jsonl file")
    else:
        raise CorpusError(f"corpus.path={path} does not exist")
    if not documents:
        what = (
            f"no files with extensions {', '.join(cfg.extensions)}"
            if path.is_dir()
            else ("no document lines")
        )
        raise CorpusError(f"corpus.path={path}: no documents found ({what})")
    _reject_duplicate_ids(documents, path)
    documents.sort(key=lambda d: d.id)
    return Corpus(documents=tuple(documents), source=str(path))


def _read_directory(root: Path, extensions: tuple[str, ...]) -> Iterator[Document]:
    wanted = {e.lower() for e in extensions}
    for file in sorted(root.rglob("*")):
        hidden = any(part.startswith(".") for part in file.relative_to(root).parts)
        if file.is_file() and not hidden and file.suffix.lower() in wanted:
            yield Document(id=file.relative_to(root).as_posix(), text=_read_utf8(file))


def _read_utf8(file: Path, encoding: str = "utf-8") -> str:
    try:
        data = file.read_bytes()
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{file}: not valid UTF-8 (byte {exc.start}: {exc.reason}); "
            "convert it, e.g. iconv -f <encoding> -t utf-8"
        ) from None
    except OSError as exc:
        raise CorpusError(f"{file}: cannot be read ({exc.strerror})") from None


def _read_jsonl(file: Path) -> Iterator[Document]:
    text = _read_utf8(file, encoding="utf-8-sig")
    # split on "\n" only: JSON strings may hold U+2028/U+0085, which splitlines() breaks on
    for line_no, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        where = f"{file}:{line_no}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{where}: invalid JSON ({exc.msg})") from None
        yield _document_from_record(record, where)


def _document_from_record(record: Any, where: str) -> Document:
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: expected a JSON object, got {type(record).__name__}")
    unknown = set(record) - {"id", "text", "title", "metadata"}
    if unknown:
        raise CorpusError(f"{where}: unknown field(s) {sorted(unknown)}")
    doc_id, text = record.get("id"), record.get("text")
    if not isinstance(doc_id, str) or not doc_id:
        raise CorpusError(f"{where}: 'id' must be a non-empty string")
    if not isinstance(text, str):
        raise CorpusError(f"{where}: document {doc_id!r}: 'text' must be a string")
    title = record.get("title")
    if title is not None and not isinstance(title, str):
        raise CorpusError(f"{where}: document {doc_id!r}: 'title' must be a string")
    metadata = record.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise CorpusError(f"{where}: document {doc_id!r}: 'metadata' must be an object")
    return Document(id=doc_id, text=text, title=title, metadata=metadata)


def _reject_duplicate_ids(documents: list[Document], source: Path) -> None:
    seen: set[str] = set()
    for doc in documents:
        if doc.id in seen:
            raise CorpusError(f"{source}: duplicate document id {doc.id!r}")
        seen.add(doc.id)
