"""A JSONL corpus that is not read again while its file is unchanged (docs/caching.md,
"The corpus fingerprint").

Reading a large JSONL corpus (parsing every line, hashing every text for the content hash
that keys the chunks) is the largest cost of a warm run that grows with the corpus: ~4 s
for 203 MB. The first run that reads a file whole stores, in the stage cache under the
file's *fingerprint* (resolved path, size, ``mtime_ns``, ``ctime_ns``, inode and device),
the document ids in corpus order, each document's byte span in the file and the content
hash. A later run whose file has the same fingerprint takes ids and hash from there and
reads a document (its one line) only when something asks for it: the golden set's
evidence, the retrieved chunks. Any write to the file changes its ``ctime_ns`` (which no
tool can set back) and normally its ``mtime_ns``, so a changed file is read whole again;
``cache.trust_mtime=false`` reads and hashes the file every run anyway.
"""

from __future__ import annotations

import json
import os
import re
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from ragsweep import corpus as corpus_module
from ragsweep.cache import StageCache, write_json
from ragsweep.config import CorpusConfig
from ragsweep.corpus import (
    Corpus,
    Document,
    document_from_record,
    json_line,
    load_corpus,
    load_corpus_with_lines,
    read_jsonl_numbered,
)
from ragsweep.errors import CorpusError
from ragsweep.hashing import sha256_json, source_digest

STAGE = "corpus"
IDS_FILE = "ids.txt"
"""The document ids in corpus order, one a line (UTF-8, lone surrogates kept): splitting
125,000 ids takes ~9 ms, parsing them as a JSON list ~19 ms (a warm run reads them every
time). Ids holding a line feed are stored as :data:`JSON_IDS_FILE` instead."""
JSON_IDS_FILE = "ids.json"
"""The document ids as a JSON list: entries written before :data:`IDS_FILE`, and corpora
whose ids hold a line feed."""
LINES_FILE = "lines.npy"
"""``(n_documents, 2)`` int64: each document's line as byte offsets ``[start, end)``."""
HASH_FILE = "content.json"
_LINE_END = re.compile(rb"\r\n|\r|\n")  # the byte form of corpus.jsonl_lines' line ends
_BOM = b"\xef\xbb\xbf"


def file_fingerprint(path: Path) -> dict[str, Any]:
    """What identifies one version of ``path`` without reading it."""
    info = path.stat()
    return {
        "path": str(path.resolve()),
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "ctime_ns": info.st_ctime_ns,
        "inode": info.st_ino,
        "device": info.st_dev,
    }


def open_corpus(cfg: CorpusConfig, cache: StageCache, trust_mtime: bool) -> Corpus:
    """The corpus of ``cfg``: for a JSONL file with an enabled cache and ``trust_mtime``,
    read lazily while its fingerprint is unchanged (module docstring); otherwise read
    whole (:func:`~ragsweep.corpus.load_corpus`)."""
    path = Path(cfg.path)
    if not (cache.enabled and trust_mtime and path.is_file() and path.suffix.lower() == ".jsonl"):
        return load_corpus(cfg)
    key = sha256_json({"file": file_fingerprint(path), "reader": _reader_code()})
    read: list[Corpus] = []

    def build(folder: Path) -> None:
        corpus, lines = _read_whole(cfg, path)
        read.append(corpus)
        write_ids(folder, corpus.ids)
        np.save(folder / LINES_FILE, lines, allow_pickle=False)
        write_json(folder / HASH_FILE, {"content_hash": corpus.content_hash()})

    def load(folder: Path) -> Corpus:
        if read:
            return read[0]
        ids = read_ids(folder)
        lines = np.load(folder / LINES_FILE, allow_pickle=False)
        content = json.loads((folder / HASH_FILE).read_text(encoding="utf-8"))["content_hash"]
        if not isinstance(content, str) or lines.shape != (len(ids), 2) or not ids:
            raise ValueError("corpus index does not match its ids")
        documents = JsonlDocuments(path, tuple(ids), lines)
        return Corpus(documents=documents, source=str(path), known_hash=content)

    return cache.get_or_build(STAGE, key, build, load)


def write_ids(folder: Path, ids: Sequence[str]) -> None:
    """``ids`` as :data:`IDS_FILE`, or :data:`JSON_IDS_FILE` when one holds a line feed."""
    if any("\n" in doc_id for doc_id in ids):
        write_json(folder / JSON_IDS_FILE, list(ids))
        return
    (folder / IDS_FILE).write_bytes("\n".join(ids).encode("utf-8", "surrogatepass"))


def read_ids(folder: Path) -> list[str]:
    """The ids :func:`write_ids` stored in ``folder`` (either file)."""
    if (folder / IDS_FILE).is_file():
        return (folder / IDS_FILE).read_bytes().decode("utf-8", "surrogatepass").split("\n")
    ids = json.loads((folder / JSON_IDS_FILE).read_text(encoding="utf-8"))
    if not isinstance(ids, list) or not all(isinstance(doc_id, str) for doc_id in ids):
        raise ValueError(f"{JSON_IDS_FILE} is not a list of document ids")
    return ids


def _reader_code() -> str:
    """The corpus reader's source: a changed reader reads every file whole again."""
    return source_digest(corpus_module)


def _read_whole(cfg: CorpusConfig, path: Path) -> tuple[Corpus, np.ndarray]:
    """The corpus read and checked whole, and each document's line as a byte span."""
    corpus, line_of = load_corpus_with_lines(cfg)
    spans = _line_spans(path.read_bytes())
    lines = np.array([spans[line_of[doc_id] - 1] for doc_id in corpus.ids], dtype=np.int64)
    return corpus, lines.reshape(len(corpus), 2)


def _line_spans(data: bytes) -> list[tuple[int, int]]:
    """``[start, end)`` byte offsets of every line (terminator excluded), as
    :func:`~ragsweep.corpus.jsonl_lines` cuts the decoded text: UTF-8 never puts a CR or LF
    byte inside a multi-byte character, so the lines are the same."""
    if b"\r" not in data:  # LF only (the usual case): one vectorized scan of the bytes
        ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")).tolist()
        starts = [0, *(end + 1 for end in ends)]
        return list(zip(starts, [*ends, len(data)], strict=True))
    spans, start = [], 0
    for match in _LINE_END.finditer(data):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(data)))
    return spans


class JsonlDocuments(Sequence[Document]):
    """The documents of an unchanged JSONL file in corpus order, each parsed from its line on
    first use (and kept). Iterating reads the whole file once."""

    def __init__(self, path: Path, ids: tuple[str, ...], lines: np.ndarray) -> None:
        self.path = path
        self.ids = ids
        self.lines = lines
        self._read: dict[int, Document] = {}
        self._fd: int | None = None  # opened on the first read, closed with self

    ids_sorted = True
    """The ids are strictly increasing (:attr:`Corpus.positions` need not check): they are
    those of the corpus read whole when the entry was built, which sorts them by id and
    rejects duplicates."""

    def __len__(self) -> int:
        return len(self.ids)

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (a launcher may send a corpus to another process): without the open
        file, which the copy opens again on its first read."""
        return {**self.__dict__, "_fd": None}

    @overload
    def __getitem__(self, index: int) -> Document: ...

    @overload
    def __getitem__(self, index: slice) -> list[Document]: ...

    def __getitem__(self, index: int | slice) -> Document | list[Document]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        found = self._read.get(index)
        if found is not None:
            return found
        start, end = self.lines[index].tolist()
        return self._parse(index, start, end)

    def read_many(self, indices: Iterable[int]) -> None:
        """Parse the documents at ``indices`` (corpus positions) not read yet, in file
        order: a warm run's retrieved chunks need a few thousand documents of a large file,
        and reading them by ascending offset lets the kernel read ahead."""
        wanted = np.fromiter((i for i in set(indices) if i not in self._read), dtype=np.int64)
        if wanted.size and (wanted.min() < 0 or wanted.max() >= len(self)):
            raise IndexError(f"document positions outside 0..{len(self) - 1}")
        spans = self.lines[wanted]
        order = np.argsort(spans[:, 0], kind="stable")
        for index, (start, end) in zip(wanted[order].tolist(), spans[order].tolist(), strict=True):
            self._parse(index, start, end)

    def _parse(self, index: int, start: int, end: int) -> Document:
        """The document at ``index`` from its line ``[start, end)``: one ``pread``, no
        buffered file object (which would read and discard a whole buffer per line)."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            weakref.finalize(self, os.close, self._fd)
        data = os.pread(self._fd, end - start, start)
        where = f"{self.path} (bytes {start}-{end})"
        if len(data) != end - start:  # the file is shorter than when it was indexed
            raise self._changed(where)
        try:
            text = data.decode("utf-8-sig" if start == 0 else "utf-8")
        except UnicodeDecodeError:
            raise self._changed(where) from None
        doc = document_from_record(json_line(text, where), where)
        if doc.id != self.ids[index]:
            raise self._changed(where)
        self._read[index] = doc
        return doc

    def _changed(self, where: str) -> CorpusError:
        return CorpusError(
            f"{where}: the corpus file changed while this run read it; run again (it is "
            "then read whole)"
        )

    def __iter__(self) -> Iterator[Document]:
        if len(self._read) < len(self):
            whole = sorted((doc for doc, _ in read_jsonl_numbered(self.path)), key=lambda d: d.id)
            if tuple(d.id for d in whole) != self.ids:
                raise self._changed(str(self.path))
            self._read = dict(enumerate(whole))
        return (self._read[i] for i in range(len(self)))
