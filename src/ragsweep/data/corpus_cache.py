"""A JSONL corpus that is not read again while its file is unchanged (docs/caching.md,
"The corpus fingerprint").

Reading a large JSONL corpus (parsing every line, hashing every text for the content hash
that keys the chunks) is the largest cost of a warm run that grows with the corpus: ~4 s
for 203 MB. The first run that reads a file whole stores, in the stage cache under the
file's *fingerprint* (resolved path, size, ``mtime_ns``, ``ctime_ns``, inode and device),
the document ids in corpus order, each document's byte span in the file and the content
hash. A later run whose file has the same fingerprint takes ids and hash from there and
reads a document (its one line) only when something asks for it: the golden set's
evidence, the retrieved chunks. The ids and spans are memory-mapped and an id is decoded
only when asked for (by position, or found by binary search), so opening the corpus costs
about the same at 125,000 documents as at 1,250. Any write to the file changes its
``ctime_ns`` (which no tool can set back) and normally its ``mtime_ns``, so a changed file
is read whole again; ``cache.trust_mtime=false`` reads and hashes the file every run
anyway.
"""

from __future__ import annotations

import json
import os
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from ragsweep.cache.entries import write_json
from ragsweep.cache.stage import StageCache
from ragsweep.config.schema import CorpusConfig
from ragsweep.core import lone_surrogates
from ragsweep.core.errors import CorpusError
from ragsweep.core.hashing import sha256_json, source_digest
from ragsweep.data import access as access_module
from ragsweep.data import corpus as corpus_module
from ragsweep.data.access import Access, access_identity, parse_access
from ragsweep.data.corpus import (
    Corpus,
    Document,
    SortedPositions,
    document_from_record,
    json_line,
    load_corpus,
    load_corpus_with_lines,
    read_jsonl_numbered,
)

STAGE = "corpus"
ID_TABLE_FILE = "ids.npy"
"""The document ids in corpus order (strictly increasing) as a fixed-width byte-string array
(numpy ``S<width>``: UTF-8, lone surrogates kept, shorter ids padded with NUL bytes),
memory-mapped on a hit: a warm run decodes only the ids it looks up (:class:`IdTable`),
where splitting all 125,000 of a list took ~5 ms. Ids this cannot hold (:func:`id_table`)
are stored as :data:`IDS_FILE` or :data:`JSON_IDS_FILE`."""
IDS_FILE = "ids.txt"
"""The document ids in corpus order, one a line (UTF-8, lone surrogates kept): entries
written before :data:`ID_TABLE_FILE`, and corpora whose ids it cannot hold (read whole on
every hit). Ids holding a line feed are stored as :data:`JSON_IDS_FILE` instead."""
JSON_IDS_FILE = "ids.json"
"""The document ids as a JSON list: entries written before :data:`IDS_FILE`, and corpora
whose ids hold a line feed and that :data:`ID_TABLE_FILE` cannot hold."""
LINES_FILE = "lines.npy"
"""``(n_documents, 2)`` int64: each document's line as byte offsets ``[start, end)``,
memory-mapped on a hit."""
TABLE_SLACK = 4
""":data:`ID_TABLE_FILE` is written when it takes at most this many times the ids' own
bytes (plus 64 KiB): padding every id to the longest must not blow up a corpus with a few
very long ids."""
HASH_FILE = "content.json"
ACCESS_FILE = "access.json"
"""The access metadata of the documents that have some (:mod:`ragsweep.data.access`), by
id: what ACL filtering needs without reading every document."""
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
    whole (:func:`~ragsweep.data.corpus.load_corpus`)."""
    path = Path(cfg.path)
    if not (cache.enabled and trust_mtime and path.is_file() and path.suffix.lower() == ".jsonl"):
        return load_corpus(cfg, cache)
    key = sha256_json({"file": file_fingerprint(path), "reader": _reader_code()})
    read: list[Corpus] = []

    def build(folder: Path) -> None:
        corpus, lines = _read_whole(cfg, path)
        read.append(corpus)
        write_ids(folder, corpus.ids)
        np.save(folder / LINES_FILE, lines, allow_pickle=False)
        write_json(folder / HASH_FILE, {"content_hash": corpus.content_hash()})
        write_json(folder / ACCESS_FILE, access_identity(corpus.access))

    def load(folder: Path) -> Corpus:
        if read:
            return read[0]
        ids = read_ids(folder)
        lines = mapped(folder / LINES_FILE)
        content = json.loads((folder / HASH_FILE).read_text(encoding="utf-8"))["content_hash"]
        if not isinstance(content, str) or lines.shape != (len(ids), 2) or not len(ids):
            raise ValueError("corpus index does not match its ids")
        if lines.dtype != np.int64:
            raise ValueError(f"{LINES_FILE} holds {lines.dtype}, expected int64")
        documents = JsonlDocuments(path, ids, lines, read_access(folder / ACCESS_FILE))
        return Corpus(documents=documents, source=str(path), known_hash=content)

    return cache.get_or_build(STAGE, key, build, load)


def write_ids(folder: Path, ids: Sequence[str]) -> None:
    """``ids`` (a corpus's, in its order) as :data:`ID_TABLE_FILE` when :func:`id_table`
    holds them, else as :data:`IDS_FILE`, or :data:`JSON_IDS_FILE` when one holds a line
    feed."""
    encoded = [doc_id.encode("utf-8", "surrogatepass") for doc_id in ids]
    table = id_table(encoded)
    if table is not None:
        np.save(folder / ID_TABLE_FILE, table, allow_pickle=False)
    elif any(b"\n" in doc_id for doc_id in encoded):
        write_json(folder / JSON_IDS_FILE, list(ids))
    else:
        (folder / IDS_FILE).write_bytes(b"\n".join(encoded))


def id_table(encoded: Sequence[bytes]) -> np.ndarray | None:
    """The ids ``encoded`` (UTF-8) as :data:`ID_TABLE_FILE`'s array, or None when it cannot
    hold them: an id with a NUL byte (the padding, which numpy strips: ``a`` and ``a\\0``
    would be one id), ids not strictly increasing as bytes (binary search needs the order;
    UTF-8 keeps code-point order, so a corpus's sorted ids always are), or a width beyond
    :data:`TABLE_SLACK`."""
    total = sum(map(len, encoded))
    width = max(map(len, encoded), default=0)
    if not width or len(encoded) * width > TABLE_SLACK * total + 65536:
        return None
    if any(b"\0" in doc_id for doc_id in encoded):
        return None
    table = np.array(encoded, dtype=f"S{width}")
    if not bool(np.all(table[:-1] < table[1:])):
        return None
    return table


def mapped(path: Path) -> np.ndarray:
    """The array in the ``.npy`` file ``path``, memory-mapped read-only, as a plain ndarray:
    indexing an ``np.memmap`` goes through its Python ``__getitem__`` (~1.6 µs a row
    against ~0.2 µs), and a warm run indexes a few thousand rows one at a time."""
    return np.asarray(np.load(path, mmap_mode="r", allow_pickle=False))


def read_ids(folder: Path) -> Sequence[str]:
    """The ids :func:`write_ids` stored in ``folder`` (any of the three files): an
    :class:`IdTable` over the memory-mapped :data:`ID_TABLE_FILE`, else a tuple."""
    if (folder / ID_TABLE_FILE).is_file():
        return IdTable(mapped(folder / ID_TABLE_FILE))
    if (folder / IDS_FILE).is_file():
        text = (folder / IDS_FILE).read_bytes().decode("utf-8", "surrogatepass")
        return tuple(text.split("\n"))
    ids = json.loads((folder / JSON_IDS_FILE).read_text(encoding="utf-8"))
    if not isinstance(ids, list) or not all(isinstance(doc_id, str) for doc_id in ids):
        raise ValueError(f"{JSON_IDS_FILE} is not a list of document ids")
    return tuple(ids)


class IdTable(Sequence[str]):
    """Document ids in strictly increasing order, held as :data:`ID_TABLE_FILE`'s array (a
    memory map on a hit) and decoded one at a time on use; iterating decodes them all."""

    def __init__(self, table: np.ndarray) -> None:
        if table.ndim != 1 or table.dtype.kind != "S" or not len(table):
            raise ValueError(f"{ID_TABLE_FILE}: expected ids as bytes, got {table.dtype}")
        self.table = table
        self._item: Callable[[int], bytes] = table.item  # one id as bytes, no numpy scalar

    def __len__(self) -> int:
        return len(self.table)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        # a warm run asks for the ids of its thousands of retrieved chunks one at a time:
        # an int (the usual case) is tried first, a slice raises TypeError
        try:
            return self._item(index).decode("utf-8", "surrogatepass")  # type: ignore[arg-type]
        except TypeError:
            if not isinstance(index, slice):
                raise
        return [self[i] for i in range(*index.indices(len(self)))]

    def __iter__(self) -> Iterator[str]:
        # NUL, the padding, is in no id: one join, one decode and one split (~2x faster
        # than decoding each id)
        joined = b"\0".join(self.table.tolist()).decode("utf-8", "surrogatepass")
        return iter(joined.split("\0"))

    def take(self, positions: np.ndarray) -> list[str]:
        """The ids at ``positions`` (ints), in that order, decoded in one go (a warm run
        names thousands of retrieved chunks' documents; ~2x faster than one at a time)."""
        picked = self.table[np.asarray(positions, dtype=np.int64)].tolist()
        if not picked:
            return []
        return b"\0".join(picked).decode("utf-8", "surrogatepass").split("\0")

    def __contains__(self, doc_id: object) -> bool:
        try:
            self.position(doc_id)
        except KeyError:
            return False
        return True

    def position(self, doc_id: object) -> int:
        """``doc_id``'s position, by binary search on the bytes (one numpy call); KeyError
        when it is not an id here."""
        if isinstance(doc_id, str):
            key = doc_id.encode("utf-8", "surrogatepass")
            found = int(self.table.searchsorted(key))
            if found < len(self.table) and self._item(found) == key:
                return found
        raise KeyError(doc_id)


class IdPositions(Mapping[str, int]):
    """``{id: position}`` over an :class:`IdTable`, each id searched once: a warm run looks
    up the same few hundred ids (the golden set's evidence documents) several times."""

    def __init__(self, ids: IdTable) -> None:
        self._ids = ids
        self._found: dict[str, int] = {}

    def __getitem__(self, doc_id: str) -> int:
        found = self._found.get(doc_id) if isinstance(doc_id, str) else None
        if found is None:
            found = self._found[doc_id] = self._ids.position(doc_id)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


def _reader_code() -> str:
    """The corpus reader's source: a changed reader reads every file whole again."""
    return source_digest(corpus_module, access_module, lone_surrogates)


def read_access(file: Path) -> dict[str, Access]:
    """The access table :data:`ACCESS_FILE` holds."""
    stored = json.loads(file.read_text(encoding="utf-8"))
    if not isinstance(stored, dict):
        raise ValueError(f"{ACCESS_FILE} is not an object")
    found = {doc_id: parse_access(fields, str(file), doc_id) for doc_id, fields in stored.items()}
    return {doc_id: item or Access() for doc_id, item in found.items()}


def _read_whole(cfg: CorpusConfig, path: Path) -> tuple[Corpus, np.ndarray]:
    """The corpus read and checked whole, and each document's line as a byte span."""
    corpus, line_of = load_corpus_with_lines(cfg)
    spans = _line_spans(path.read_bytes())
    lines = np.array([spans[line_of[doc_id] - 1] for doc_id in corpus.ids], dtype=np.int64)
    return corpus, lines.reshape(len(corpus), 2)


def _line_spans(data: bytes) -> list[tuple[int, int]]:
    """``[start, end)`` byte offsets of every line (terminator excluded), as
    :func:`~ragsweep.data.corpus.jsonl_lines` cuts the decoded text: UTF-8 never puts a CR or LF
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

    def __init__(
        self,
        path: Path,
        ids: Sequence[str],
        lines: np.ndarray,
        access: Mapping[str, Access] | None = None,
    ) -> None:
        """``ids`` are strictly increasing: those of the corpus read whole when the entry
        was built, which sorts them and rejects duplicates; ``lines`` as :data:`LINES_FILE`;
        ``access`` as :data:`ACCESS_FILE` (:attr:`Corpus.access`)."""
        self.path = path
        self.access = access
        self.ids = ids
        self.lines = lines
        self.positions: Mapping[str, int] = (
            IdPositions(ids) if isinstance(ids, IdTable) else SortedPositions(ids)
        )
        """Each id's position (:attr:`Corpus.positions`), found without checking the
        order."""
        self._read: dict[int, Document] = {}
        self._fd: int | None = None  # opened on the first read, closed with self

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
            if [d.id for d in whole] != list(self.ids):
                raise self._changed(str(self.path))
            self._read = dict(enumerate(whole))
        return (self._read[i] for i in range(len(self)))
