"""Views of a chunk table's rows for the warm path: what a warm run reads instead of the
table's spans, texts or chunk objects.

:class:`KnownRows` (retrieved rows' spans and ids stored with cached rankings) and
:class:`PackedTexts` (their texts, concatenated) are given to a table
(:meth:`ragsweep.chunk.table.ChunkTable.add_known_rows`,
:meth:`~ragsweep.chunk.table.ChunkTable.add_packed_texts`); :class:`ChunkColumns` is what the
table hands scoring (ids and intervals as columns, :class:`CodedIntervals` as plain arrays,
building no chunk); :class:`ChunkRows` is a sequence of the table's rows whose chunks are
built on access. Each reads a table only through :class:`RowSource`, the table's interface.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, overload

import numpy as np

from ragsweep.chunk.chunkers import Chunk


@dataclass(frozen=True)
class KnownRows:
    """Rows of a chunk table (``rows``, ascending) with their spans (``spans[i]``, as in
    :data:`ragsweep.chunk.table.SPANS_FILE`), chunk ids and document ids, stored with cached
    rankings (:data:`ragsweep.index.stages.KNOWN_SPANS_FILE`,
    :data:`ragsweep.index.stages.KNOWN_IDS_FILE`)."""

    rows: np.ndarray
    spans: np.ndarray
    ids: list[str]
    docs: list[str]

    @functools.cached_property
    def _row_list(self) -> list[int]:
        return self.rows.tolist()

    def position(self, row: int) -> int | None:
        """The index of ``row`` among :attr:`rows`, or None."""
        return _index_in(self._row_list, row)

    def positions(self, picked: np.ndarray) -> np.ndarray | None:
        """The indices of the rows ``picked`` among :attr:`rows`, or None unless all are."""
        if not len(self.rows):
            return None if len(picked) else np.empty(0, dtype=np.int64)
        found = np.searchsorted(self.rows, picked).clip(0, len(self.rows) - 1)
        return found if np.array_equal(self.rows[found], picked) else None

    def ids_at(self, found: np.ndarray) -> tuple[list[str], list[str]]:
        """The chunk ids and document ids at the indices ``found``."""
        if np.array_equal(found, np.arange(len(self.rows))):  # every row (the usual case)
            return list(self.ids), list(self.docs)
        picked = found.tolist()
        return [self.ids[i] for i in picked], [self.docs[i] for i in picked]


class PackedTexts:
    """Texts of ascending chunk ``rows`` concatenated (``packed``): row ``rows[i]``'s text
    is ``packed[offsets[i]:offsets[i + 1]]`` (characters)."""

    def __init__(self, rows: list[int], offsets: list[int], packed: str) -> None:
        self.rows, self.offsets, self.packed = rows, offsets, packed

    def __contains__(self, row: object) -> bool:
        return isinstance(row, int) and _index_in(self.rows, row) is not None

    def get(self, row: int) -> str | None:
        """Row ``row``'s text, or None when it is not among the rows."""
        i = _index_in(self.rows, row)
        return None if i is None else self.packed[self.offsets[i] : self.offsets[i + 1]]


def _index_in(ascending: list[int], row: int) -> int | None:
    """The index of ``row`` in the list ``ascending`` (distinct values), or None."""
    i = bisect.bisect_left(ascending, row)
    return i if i < len(ascending) and ascending[i] == row else None


@dataclass(frozen=True)
class CodedIntervals:
    """Chunks' intervals with their documents already coded, as plain int64 arrays (views of
    the table's spans, not copies): chunk i is ``(doc[i], start[i], end[i])``, ``doc[i]``
    its document's code. ``codes`` maps every document id of their corpus to its code (its
    position), by which other intervals of that corpus (evidence) are coded alike."""

    doc: np.ndarray
    start: np.ndarray
    end: np.ndarray
    codes: Mapping[str, int]


@dataclass(frozen=True)
class ChunkColumns:
    """Chunks as columns: ``ids[i]``, ``docs[i]``, ``starts[i]``, ``ends[i]`` are chunk i's
    :attr:`~ragsweep.chunk.chunkers.Chunk.id`, document id and character offsets. ``coded``:
    the same intervals coded by corpus position (from a chunk table), so scoring need not
    code every chunk's document id; None for chunks given as objects."""

    ids: list[str]
    docs: list[str]
    starts: list[int]
    ends: list[int]
    coded: CodedIntervals | None = None

    @classmethod
    def of(cls, chunks: Iterable[Chunk]) -> ChunkColumns:
        listed = list(chunks)
        return cls(
            ids=[c.id for c in listed],
            docs=[c.doc for c in listed],
            starts=[c.start for c in listed],
            ends=[c.end for c in listed],
        )


class RowSource(Protocol):
    """What :class:`ChunkRows` reads a chunk table through
    (:class:`ragsweep.chunk.table.ChunkTable`)."""

    def __getitem__(self, index: int, /) -> Chunk: ...

    def take(self, rows: Sequence[int]) -> list[Chunk]: ...

    def columns(self, rows: Sequence[int] | np.ndarray) -> ChunkColumns: ...


class ChunkRows(Sequence[Chunk]):
    """The chunks of ``table`` at ``rows`` (ascending, distinct), each built on first
    access: a warm run's retrieved chunks, of which the files read only the top chunk of
    each case when their ``chunks.jsonl`` lines are cached (:mod:`ragsweep.run.files`)."""

    def __init__(self, table: RowSource, rows: np.ndarray) -> None:
        self.table = table
        self.rows = np.asarray(rows, dtype=np.int64).reshape(-1)

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> Chunk: ...

    @overload
    def __getitem__(self, index: slice) -> list[Chunk]: ...

    def __getitem__(self, index: int | slice) -> Chunk | list[Chunk]:
        if isinstance(index, slice):
            return self.table.take(self.rows[index].tolist())
        return self.table[int(self.rows[index])]

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self.table.take(self.rows.tolist()))

    @functools.cached_property
    def ids(self) -> list[str]:
        """Each chunk's id, in order, without building the chunks."""
        return self.table.columns(self.rows).ids

    def subset(self, keep: Sequence[int]) -> ChunkRows:
        """The chunks at positions ``keep`` (ascending) of these."""
        return ChunkRows(self.table, self.rows[np.asarray(keep, dtype=np.int64)])


def chunk_ids(chunks: Sequence[Chunk]) -> list[str]:
    """The ids of ``chunks`` in order; of :class:`ChunkRows` without building them."""
    if isinstance(chunks, ChunkRows):
        return chunks.ids
    return [c.id for c in chunks]
