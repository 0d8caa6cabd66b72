"""A run's chunks as columns: spans in numpy arrays, a :class:`~ragsweep.chunk.chunkers.Chunk` built
only for the rows that are read.

A warm run of a large corpus reads few chunks (the ones some case retrieved: scoring,
budget packing, ``cases.jsonl``, ``chunks.jsonl``, the judge), so building one ``Chunk``
(and slicing its text) per chunk of the corpus would be most of its work: ~8 s for 1M
chunks. The table keeps the spans as arrays (memory-mapped when loaded from the stage
cache) and builds a chunk on indexing. Iterating it builds every chunk, which only the
stages that need every text do (indexed texts, an index build). Scoring reads the
retrieved rows as columns (:meth:`ChunkTable.columns`), building none. A warm run whose
rankings are cached is given their chunks' texts stored with them
(:meth:`ChunkTable.add_packed_texts`), and builds a chunk from its text, without reading
its document, only when something reads it (:class:`~ragsweep.chunk.views.ChunkRows`).
Those warm-path views (known rows, packed texts, columns, rows built on access) are
:mod:`ragsweep.chunk.views`; this module owns the table, its files and how a row becomes a
chunk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import overload

import numpy as np

from ragsweep.chunk.chunkers import Chunk, make_chunk
from ragsweep.chunk.views import ChunkColumns, ChunkRows, CodedIntervals, KnownRows, PackedTexts
from ragsweep.data.corpus import Corpus

SPANS_FILE = "spans.npy"
"""``(n_chunks, 4)`` int64: document position in the corpus (its id order), start, end,
heading-path code."""
HEADINGS_FILE = "headings.json"
"""The distinct heading paths, a list of lists of titles; column 3 of the spans indexes it."""
BOUNDS_FILE = "bounds.json"
"""The spans' lowest value and highest document and heading codes, written with them, so
loading checks a table against its corpus without reading every row (:meth:`ChunkTable.load`;
the stage cache verifies both files alike)."""
LEGACY_FILE = "data.json"
"""Chunk entries written before the table: ``[[doc, start, end, heading_path], ...]``."""


class ChunkTable(Sequence[Chunk]):
    """The chunks of ``corpus`` at the rows of ``spans`` (see :data:`SPANS_FILE`), in index
    order; ``table[i]`` is built on use and equals what chunking produced."""

    def __init__(self, corpus: Corpus, spans: np.ndarray, headings: Sequence[tuple[str, ...]]):
        if spans.ndim != 2 or spans.shape[1] != 4:
            raise ValueError(f"chunk spans have shape {spans.shape}, expected (n, 4)")
        self.corpus = corpus
        self.spans = spans
        self.headings = tuple(headings)
        self._built: dict[int, Chunk] = {}  # the rows read so far (scoring, then files)
        self._texts: dict[int, str] = {}  # rows whose text is known (:meth:`add_texts`)
        self._packed: PackedTexts | None = None  # more of them (:meth:`add_packed_texts`)
        self._known: KnownRows | None = None  # rows read without the spans (:meth:`add_known_rows`)
        self._last_columns: tuple[np.ndarray, ChunkColumns] | None = None

    @classmethod
    def from_chunks(cls, corpus: Corpus, chunks: Sequence[Chunk]) -> ChunkTable:
        position = {doc_id: i for i, doc_id in enumerate(corpus.ids)}
        codes: dict[tuple[str, ...], int] = {}
        spans = np.array(
            [
                (position[c.doc], c.start, c.end, codes.setdefault(c.heading_path, len(codes)))
                for c in chunks
            ],
            dtype=np.int64,
        ).reshape(len(chunks), 4)
        return cls(corpus, spans, list(codes))

    def save(self, folder: Path) -> None:
        np.save(folder / SPANS_FILE, np.ascontiguousarray(self.spans), allow_pickle=False)
        (folder / HEADINGS_FILE).write_text(
            json.dumps([list(h) for h in self.headings], ensure_ascii=False), encoding="utf-8"
        )
        (folder / BOUNDS_FILE).write_text(json.dumps(self._bounds()), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path, corpus: Corpus) -> ChunkTable:
        """The table stored in ``folder``, its spans memory-mapped. Raises ValueError,
        KeyError or OSError on content that is not a chunk table of ``corpus``, so the
        stage cache discards it and chunks again: among them an entry of the JSON layout
        written before the table (:data:`LEGACY_FILE`)."""
        if (folder / LEGACY_FILE).is_file():
            raise ValueError(f"{LEGACY_FILE}: a chunk entry of the layout before the table")
        spans = np.load(folder / SPANS_FILE, mmap_mode="r", allow_pickle=False)
        headings = json.loads((folder / HEADINGS_FILE).read_text(encoding="utf-8"))
        table = cls(corpus, spans, [tuple(h) for h in headings])
        bounds_file = folder / BOUNDS_FILE
        stored = (
            json.loads(bounds_file.read_text(encoding="utf-8")) if bounds_file.is_file() else None
        )
        table._check(stored)  # without the file (older entries): from the spans themselves
        return table

    def _bounds(self) -> dict[str, int]:
        """The lowest value of the spans and their highest document and heading codes
        (-1 for an empty table): what :meth:`_check` compares with the corpus."""
        if len(self.spans) == 0:
            return {"low": 0, "doc": -1, "heading": -1}
        # one pass over the whole (contiguous) array, then the two columns: ~7x faster on
        # 1M rows than reducing along axis 0
        spans = np.asarray(self.spans)
        return {
            "low": int(spans.min()),
            "doc": int(spans[:, 0].max()),
            "heading": int(spans[:, 3].max()),
        }

    def _check(self, bounds: object = None) -> None:
        """Every row names a document of the corpus and a known heading path: a table
        that does not fit its corpus is malformed, not served. ``bounds``: the
        :meth:`_bounds` stored with the spans (:data:`BOUNDS_FILE`), else computed."""
        if self.spans.dtype != np.int64:
            raise ValueError(f"chunk spans are {self.spans.dtype}, expected int64")
        if bounds is None:
            bounds = self._bounds()
        if (
            not isinstance(bounds, dict)
            or set(bounds) != {"low", "doc", "heading"}
            or not all(type(value) is int for value in bounds.values())
        ):
            raise ValueError(f"{BOUNDS_FILE} holds no chunk span bounds")
        low, docs, headings = bounds["low"], bounds["doc"], bounds["heading"]
        if low < 0 or docs >= len(self.corpus) or headings >= len(self.headings):
            raise ValueError("chunk spans point outside the corpus or the heading list")
        if len(self.spans) and (docs < 0 or headings < 0):
            raise ValueError(f"{BOUNDS_FILE} does not describe the chunk spans")

    def __len__(self) -> int:
        return len(self.spans)

    @overload
    def __getitem__(self, index: int) -> Chunk: ...

    @overload
    def __getitem__(self, index: slice) -> list[Chunk]: ...

    def __getitem__(self, index: int | slice) -> Chunk | list[Chunk]:
        if isinstance(index, slice):
            return [self._chunk(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"chunk {index} of {len(self)}")
        return self._chunk(index)

    def _chunk(self, row: int) -> Chunk:
        found = self._built.get(row)
        if found is None:
            found = self._built[row] = self._build(row, *self._span(row))
        return found

    def _build(self, row: int, doc: int, start: int, end: int, heading: int) -> Chunk:
        """The chunk of ``row`` (span ``doc, start, end, heading``): from its given text
        (:meth:`add_texts`, :meth:`add_packed_texts`) when there is one, else cut from
        its document."""
        text = self._known_text(row)
        if text is None:
            return make_chunk(self.corpus.documents[doc], start, end, self.headings[heading])
        return _known_chunk(self.corpus.ids[doc], start, end, text, self.headings[heading])

    def take(self, rows: Sequence[int]) -> list[Chunk]:
        """The chunks at ``rows`` (non-negative), in that order: their spans read in one
        go, each of their documents parsed once (in file order, when the corpus reads
        documents on use: :meth:`~ragsweep.data.corpus_cache.JsonlDocuments.read_many`)."""
        picked = np.asarray(rows, dtype=np.int64).reshape(-1)
        built = self._built
        try:  # every row built already (a warm run's second read): no span is read
            return list(map(built.__getitem__, picked.tolist()))
        except KeyError:
            pass
        if picked.size and (picked.min() < 0 or picked.max() >= len(self)):
            raise IndexError(f"chunk rows outside 0..{len(self) - 1}")
        spans = self._spans_of(picked).tolist()
        read_many = getattr(self.corpus.documents, "read_many", None)
        rows = picked.tolist()
        if read_many is not None:  # the documents of the rows neither built nor known
            read_many(self._unknown_docs(rows, spans))
        taken = []
        for row, span in zip(rows, spans, strict=True):
            chunk = built.get(row)
            if chunk is None:
                chunk = built[row] = self._build(row, *span)
            taken.append(chunk)
        return taken

    def _unknown_docs(self, rows: list[int], spans: list[list[int]]) -> set[int]:
        """The documents of ``rows`` (with their ``spans``) neither built nor known."""
        built, texts, packed = self._built, self._texts, self._packed or ()
        return {
            span[0]
            for row, span in zip(rows, spans, strict=True)
            if row not in built and row not in texts and row not in packed
        }

    def add_known_rows(self, known: KnownRows) -> None:
        """Read the spans, chunk ids and document ids of ``known.rows`` from ``known``
        instead of from the table's spans and the corpus (a warm run's retrieved rows,
        stored with the cached rankings: reading them from a memory-mapped table of 1M rows
        touches a page each). ValueError, and nothing given, when they are not this
        table's (:meth:`_check_known`)."""
        self._check_known(known)
        self._known = known
        self._last_columns = None

    def _check_known(self, known: KnownRows) -> None:
        """ValueError unless ``known`` has one span, chunk id and document id (strings)
        per row, its rows ascend within the table, and on :data:`KNOWN_SAMPLE` rows spread
        over them its spans and ids are the table's and the corpus's."""
        rows = known.rows
        lengths = {len(rows), len(known.ids), len(known.docs)}
        if known.spans.shape != (len(rows), 4) or len(lengths) != 1:
            raise ValueError("known chunk rows, spans and ids of different lengths")
        if not set(map(type, known.ids)) | set(map(type, known.docs)) <= {str}:
            raise ValueError("known chunk ids and document ids must be strings")
        if len(rows) and (rows[0] < 0 or rows[-1] >= len(self) or np.any(np.diff(rows) <= 0)):
            raise ValueError("known chunk rows are not ascending rows of the table")
        spread = np.linspace(0, len(rows) - 1, min(KNOWN_SAMPLE, len(rows)))
        sample = np.unique(spread.astype(np.int64))
        if not np.array_equal(np.asarray(self.spans[rows[sample]]), known.spans[sample]):
            raise ValueError("known chunk spans are not the table's")
        ids = self.corpus.ids
        for i in sample.tolist():
            doc, start, end, _ = known.spans[i].tolist()
            if known.docs[i] != ids[doc] or known.ids[i] != chunk_id(known.docs[i], start, end):
                raise ValueError(f"known chunk id {known.ids[i]!r} is not the table's")

    def _spans_of(self, picked: np.ndarray) -> np.ndarray:
        """The spans at the rows ``picked`` (in range): from the known rows when they hold
        them all, else from the table."""
        known = self._known
        found = known.positions(picked) if known is not None else None
        if found is not None and known is not None:
            return known.spans[found]
        return np.asarray(self.spans[picked])

    def _span(self, row: int) -> list[int]:
        """The span of ``row`` as ``[doc, start, end, heading]``."""
        known = self._known
        i = known.position(row) if known is not None else None
        if i is not None and known is not None:
            listed: list[int] = known.spans[i].tolist()
            return listed
        return self.spans[row].tolist()

    def _known_text(self, row: int) -> str | None:
        """The given text of ``row`` (:meth:`add_texts`, :meth:`add_packed_texts`)."""
        text = self._texts.get(row)
        if text is None and self._packed is not None:
            return self._packed.get(row)
        return text

    def add_texts(self, rows: Sequence[int], texts: Sequence[str]) -> None:
        """Build the chunks at ``rows``, when read, from their known ``texts``
        (``texts[i]`` is the text of row ``rows[i]``, as cut from its document) instead of
        from their documents: a warm run's retrieved chunks, whose texts are stored with
        the cached rankings (:data:`ragsweep.index.stages.RETRIEVED_FILE`, the older layout), so
        their documents are never read. Rows already built are kept. ValueError when a row
        is outside the table or a text's length is not its span's (texts of another chunk
        set)."""
        picked = np.asarray(rows, dtype=np.int64).reshape(-1)
        if len(texts) != picked.size:
            raise ValueError(f"{len(texts)} texts for {picked.size} chunk rows")
        if picked.size and (picked.min() < 0 or picked.max() >= len(self)):
            raise ValueError(f"chunk rows outside 0..{len(self) - 1}")
        spans = self._spans_of(picked)
        _check_text_lengths(picked, spans, texts)
        self._texts.update(zip(picked.tolist(), texts, strict=True))

    def add_packed_texts(
        self, rows: Sequence[int], packed: str, known: KnownRows | None = None
    ) -> None:
        """:meth:`add_texts` of texts given concatenated in the order of ``rows``
        (ascending, distinct): each row's text is the next span length of characters, cut
        only when its chunk is read (a warm run reads few of its retrieved chunks' texts).
        With ``known`` (those rows' spans and ids, :meth:`add_known_rows`), the spans cut
        the texts from there. Replaces texts given packed before. ValueError, and nothing
        given, when a row is outside the table, the rows are not ascending or not
        ``known``'s, ``known`` is not the table's, or ``packed`` is not as long as the spans
        together (texts of another chunk set)."""
        picked = np.asarray(rows, dtype=np.int64).reshape(-1)
        if picked.size and (picked.min() < 0 or picked.max() >= len(self)):
            raise ValueError(f"chunk rows outside 0..{len(self) - 1}")
        if np.any(np.diff(picked) <= 0):
            raise ValueError("packed chunk texts need ascending, distinct rows")
        if known is not None:
            self._check_known(known)
            if not np.array_equal(known.rows, picked):
                raise ValueError("the packed texts' rows are not the known rows")
        spans = known.spans if known is not None else self._spans_of(picked)
        ends = np.cumsum(spans[:, 2] - spans[:, 1])
        total = int(ends[-1]) if ends.size else 0
        if total != len(packed):
            raise ValueError(
                f"the packed texts of {picked.size} chunk rows hold {len(packed)} characters, "
                f"their spans {total}"
            )
        self._packed = PackedTexts(picked.tolist(), [0, *ends.tolist()], packed)
        if known is not None:
            self._known = known
            self._last_columns = None

    def columns(self, rows: Sequence[int] | np.ndarray) -> ChunkColumns:
        """The ids and intervals of the chunks at ``rows`` (non-negative), from the spans
        alone: no chunk is built and no text or document read (scoring needs no more).
        The same rows twice give the same object (scoring, then the files): read-only."""
        picked = np.asarray(rows, dtype=np.int64).reshape(-1)
        last = self._last_columns
        if last is not None and np.array_equal(last[0], picked):
            return last[1]  # scoring, then the files, read the same rows
        if picked.size and (picked.min() < 0 or picked.max() >= len(self)):
            raise IndexError(f"chunk rows outside 0..{len(self) - 1}")
        columns = self._columns(picked)
        self._last_columns = (picked.copy(), columns)  # the caller may reuse its array
        return columns

    def _columns(self, picked: np.ndarray) -> ChunkColumns:
        known = self._known.positions(picked) if self._known is not None else None
        spans = self._spans_of(picked)
        starts, ends = spans[:, 1].tolist(), spans[:, 2].tolist()
        if known is not None and self._known is not None:
            ids, docs = self._known.ids_at(known)
        else:
            docs = ids_at(self.corpus.ids, spans[:, 0])
            ids = [
                chunk_id(doc, start, end)
                for doc, start, end in zip(docs, starts, ends, strict=True)
            ]
        return ChunkColumns(
            ids=ids,
            docs=docs,
            starts=starts,
            ends=ends,
            coded=CodedIntervals(spans[:, 0], spans[:, 1], spans[:, 2], self.corpus.positions),
        )

    def __iter__(self) -> Iterator[Chunk]:
        documents, headings = self.corpus.documents, self.headings
        for doc, start, end, heading in self.spans.tolist():
            yield make_chunk(documents[doc], start, end, headings[heading])

    def doc_codes(self) -> np.ndarray:
        """Each chunk's document as its position in the corpus's id order (int64)."""
        return np.asarray(self.spans[:, 0])

    def doc_positions(self) -> Mapping[str, int]:
        """Each document id's code (:meth:`doc_codes`)."""
        return self.corpus.positions


KNOWN_SAMPLE = 64
"""How many of the known rows :meth:`ChunkTable.add_known_rows` compares with the table."""


def chunk_id(doc: str, start: int, end: int) -> str:
    """A chunk's id from its span (:attr:`~ragsweep.chunk.chunkers.Chunk.id`)."""
    return f"{doc}@{start}-{end}"


def _check_text_lengths(rows: np.ndarray, spans: np.ndarray, texts: Sequence[object]) -> None:
    """ValueError unless every ``texts[i]`` is a str as long as the span ``spans[i]`` (of
    chunk row ``rows[i]``); checked on whole arrays, a warm run gives thousands."""
    if not set(map(type, texts)) <= {str}:  # else the slower check, which admits subclasses
        bad = next((i for i, text in enumerate(texts) if not isinstance(text, str)), None)
        if bad is not None:
            raise ValueError(f"the text given for chunk row {rows[bad]} is not its span's")
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))  # type: ignore[arg-type]
    wrong = np.flatnonzero(lengths != spans[:, 2] - spans[:, 1])
    if wrong.size:
        raise ValueError(f"the text given for chunk row {rows[wrong[0]]} is not its span's")


def _known_chunk(
    doc_id: str, start: int, end: int, text: str, heading_path: tuple[str, ...]
) -> Chunk:
    """The chunk :func:`~ragsweep.chunk.chunkers.make_chunk` cuts from document ``doc_id``, whose
    ``text[start:end]`` is ``text``; its id is derived from the span the same way (that
    helper is not split in two: chunkers.py's source digest is part of every chunks key)."""
    return Chunk(chunk_id(doc_id, start, end), doc_id, start, end, text, heading_path)


def ids_at(ids: Sequence[str], positions: np.ndarray) -> list[str]:
    """``[ids[p] for p in positions]``; in one go for ids that can (a memory-mapped id
    table: :meth:`~ragsweep.data.corpus_cache.IdTable.take`)."""
    take = getattr(ids, "take", None)
    if take is not None:
        taken: list[str] = take(positions)
        return taken
    return [ids[p] for p in positions.tolist()]


def chunk_columns(chunks: Sequence[Chunk], rows: Sequence[int]) -> ChunkColumns:
    """The ids and intervals of ``chunks[row]`` for each of ``rows``; of a
    :class:`ChunkTable` from its spans (:meth:`ChunkTable.columns`)."""
    if isinstance(chunks, ChunkTable):
        return chunks.columns(rows)
    return ChunkColumns.of(chunks[row] for row in rows)


def rows_of(chunks: Sequence[Chunk], rows: np.ndarray) -> Sequence[Chunk]:
    """The chunks at ``rows`` (ascending, distinct) of ``chunks``: of a
    :class:`ChunkTable` as :class:`ChunkRows`, built on access."""
    if isinstance(chunks, ChunkTable):
        return ChunkRows(chunks, rows)
    return take_rows(chunks, rows.tolist())


def take_rows(chunks: Sequence[Chunk], rows: Sequence[int]) -> list[Chunk]:
    """``[chunks[row] for row in rows]``; for a :class:`ChunkTable` through
    :meth:`ChunkTable.take`, which reads the rows' documents once each."""
    if isinstance(chunks, ChunkTable):
        return chunks.take(rows)
    return [chunks[row] for row in rows]
