"""Dense vectors (and reranker scores) content-addressed per text: the embedding store.

One store per model identity under ``<cache_dir>/embeddings/<model key>/``: shards of
(text sha256 → row) written as ``.npy`` (memory-mappable, no pickles) with their
``keys.json`` and ``meta.json`` (:func:`ragsweep.cache.entries.verify_shard`), so every
distinct text is embedded once across all configurations of a sweep. Shards take no lock:
each writer adds a complete shard of its own and the first shard (by name) wins.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragsweep.cache.entries import (
    META,
    CorruptEntry,
    read_meta,
    read_shard_keys,
    remove_entry,
    seal_entry,
    touch,
    verify_shard,
    write_json,
)
from ragsweep.cache.stage import StageCache, StageStats, out_of_space
from ragsweep.core.disk import is_out_of_space_error
from ragsweep.core.hashing import sha256_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Row:
    shard: str
    row: int


@dataclass(frozen=True)
class _Listing:
    """What a shard's ``meta.json`` and ``keys.json`` say, read without checksums."""

    seconds: float
    keys: list[str]


class EmbeddingStore:
    """Vectors of one model identity, addressed by the sha256 of the exact embedded text.

    ``embed(texts, encode)`` returns one row per text; only texts never embedded before
    with this model are passed to ``encode``, as one new shard. Several processes may add
    shards for the same texts at once: each shard is complete and verified on its own, and
    identical texts give identical rows, so duplicates are harmless (the first one wins).

    A corrupt or malformed shard (checksums, metadata, keys, or a vector array whose shape
    does not match them) is removed and its texts are embedded again, however many shards
    one call needs. In a store that refuses writes, new vectors are kept in memory for the
    rest of the process instead.
    """

    def __init__(self, cache: StageCache, model_key: str, dimension: int) -> None:
        self.cache = cache
        self.model_key = model_key
        self.dimension = dimension
        self._verified: dict[str, np.ndarray] = {}
        self._seconds_per_text = 0.0
        self._known: dict[str, _Row] | None = None  # shard index; rescanned on a miss
        self._computed = (0.0, 0)  # compute seconds and rows of the shards in _known
        self._memory: dict[str, list[str]] = {}  # shards kept in memory (store refused writes)
        self._bad: set[str] = set()  # shards found corrupt: never used again by this store
        self._found_malformed = 0  # malformed shards skipped by scans, not yet counted

    @property
    def folder(self) -> Path | None:
        if self.cache.root is None:
            return None
        return self.cache.root / "embeddings" / self.model_key

    def embed(
        self,
        texts: Sequence[str],
        encode: Callable[[Sequence[str]], np.ndarray],
        stage: str,
    ) -> np.ndarray:
        """``(len(texts), dimension)`` float32 rows, computing only unseen texts."""
        stats = self.cache.stats.stage(stage)
        keys = [sha256_text(t) for t in texts]
        if self.folder is None:
            return self._embed_uncached(keys, texts, encode, stats)
        encoded = 0
        fresh = self._known is None
        while True:  # every pass that finds corrupt shards drops them for good: it ends
            index = self._index(rescan=fresh)
            missing = _unique_missing(keys, texts, index)
            if missing and not fresh:  # another process may have written them meanwhile
                index = self._index(rescan=True)
                missing = _unique_missing(keys, texts, index)
            stats.corrupt += self._take_malformed()
            if missing:
                started = time.perf_counter()
                vectors = encode([text for _, text in missing])
                self._add_shard([k for k, _ in missing], vectors, time.perf_counter() - started)
                index = self._index(rescan=False)
                encoded += len(missing)
            bad = self._corrupt_shards({index[key].shard for key in keys})
            if not bad:
                break
            stats.corrupt += len(bad)
            fresh = True
        distinct = len(set(keys))
        stats.misses += encoded
        stats.hits += distinct - encoded
        stats.seconds_saved += self._seconds_per_text * (distinct - encoded)
        return self._gather(keys, index)

    def _embed_uncached(
        self,
        keys: Sequence[str],
        texts: Sequence[str],
        encode: Callable[[Sequence[str]], np.ndarray],
        stats: StageStats,
    ) -> np.ndarray:
        """Cache disabled: embed each distinct text of this call once, store nothing."""
        unique = _unique_missing(keys, texts, {})
        vectors = self._checked(encode([text for _, text in unique]), len(unique))
        row_of = {key: row for row, (key, _) in enumerate(unique)}
        stats.misses += len(unique)
        return vectors[[row_of[k] for k in keys]]

    def _checked(self, vectors: np.ndarray, rows: int) -> np.ndarray:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape != (rows, self.dimension):
            raise ValueError(
                f"encoder returned shape {vectors.shape}, expected ({rows}, {self.dimension})"
            )
        return vectors

    def _index(self, rescan: bool) -> dict[str, _Row]:
        """text key → (shard, row) over all complete shards; first shard (by name) wins.

        The scan is kept in memory; ``rescan`` reads the folder again."""
        if self._known is not None and not rescan:
            return self._known
        self._known = self._scan()
        return self._known

    def _scan(self) -> dict[str, _Row]:
        index: dict[str, _Row] = {}
        total_seconds, total_rows = 0.0, 0
        for name, listing in [*self._disk_listings(), *self._memory_listings()]:
            total_seconds += listing.seconds
            total_rows += len(listing.keys)
            for row, key in enumerate(listing.keys):
                index.setdefault(key, _Row(name, row))
        self._set_computed(total_seconds, total_rows)
        return index

    def _disk_listings(self) -> Iterator[tuple[str, _Listing]]:
        """Every complete shard on disk, by name; malformed ones are dropped (and counted)."""
        folder = self.folder
        if folder is None or not folder.exists():
            return
        shards = (p for p in folder.iterdir() if not p.name.startswith("."))  # no tmp/trash
        for shard in sorted(p for p in shards if (p / META).is_file()):
            if shard.name in self._bad:
                continue
            try:
                yield shard.name, _read_listing(shard)
            except CorruptEntry as exc:
                self._found_malformed += 1
                self._drop(shard.name, str(exc))

    def _memory_listings(self) -> Iterator[tuple[str, _Listing]]:
        for name, keys in self._memory.items():
            yield name, _Listing(0.0, keys)

    def _take_malformed(self) -> int:
        found, self._found_malformed = self._found_malformed, 0
        return found

    def _set_computed(self, seconds: float, rows: int) -> None:
        self._computed = (seconds, rows)
        self._seconds_per_text = seconds / rows if rows else 0.0

    def _add_shard(self, keys: list[str], vectors: np.ndarray, seconds: float) -> None:
        """Write a shard of new rows and add it to the in-memory index, without reading
        the folder or the shard back (its rows are the vectors in hand)."""
        vectors = self._checked(vectors, len(keys))
        name = self._write_shard(keys, vectors, seconds)
        if name is None:  # the store refuses writes: keep the rows for this process
            name = f".memory-{uuid.uuid4().hex}"
            self._memory[name] = keys
        assert self._known is not None
        for row, key in enumerate(keys):
            self._known.setdefault(key, _Row(name, row))
        self._verified[name] = vectors
        total_seconds, total_rows = self._computed
        self._set_computed(total_seconds + seconds, total_rows + len(keys))

    def _write_shard(self, keys: list[str], vectors: np.ndarray, seconds: float) -> str | None:
        """Write ``vectors`` (already checked) as a new shard; return its name, or None when
        the store refuses writes. A full disk raises CacheError naming ``cache.dir``."""
        folder = self.folder
        assert folder is not None and self.cache.root is not None
        if self.cache.read_only:
            return None
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        tmp = folder / f".tmp-{name}"
        if not self.cache.make_dir(tmp, "an embedding shard"):
            return None
        try:
            np.save(tmp / "vectors.npy", vectors, allow_pickle=False)
            write_json(tmp / "keys.json", keys)
            seal_entry(tmp, "embeddings", seconds, {"rows": len(keys), "dim": self.dimension})
            os.rename(tmp, folder / name)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if is_out_of_space_error(exc, folder):
                raise out_of_space(self.cache.root, "an embedding shard", exc) from exc
            raise
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return name

    def _corrupt_shards(self, names: set[str]) -> list[str]:
        """Verify every shard in ``names`` not verified yet; drop and return the bad ones."""
        bad = []
        for name in sorted(names - set(self._verified)):
            try:
                self._verified[name] = self._verified_vectors(name)
            except CorruptEntry as exc:
                self._drop(name, str(exc))
                bad.append(name)
        return bad

    def _verified_vectors(self, name: str) -> np.ndarray:
        assert self.folder is not None
        path = self.folder / name
        verify_shard(path, self.dimension)
        touch(path)
        return np.load(path / "vectors.npy", mmap_mode="r")

    def _drop(self, name: str, reason: str) -> None:
        """Never use shard ``name`` again; remove it from disk if the store allows."""
        assert self.folder is not None
        self._bad.add(name)
        path = self.folder / name
        if remove_entry(path):
            log.warning(
                "cache: embedding shard %s is corrupt (%s): removed, recomputing", path, reason
            )
        else:
            log.warning(
                "cache: embedding shard %s is corrupt (%s) and cannot be removed: "
                "recomputing; run ragsweep-cache --cache-dir %s verify where the store is "
                "writable",
                path,
                reason,
                self.cache.root,
            )

    def _gather(self, keys: Sequence[str], index: dict[str, _Row]) -> np.ndarray:
        """The rows of ``keys`` from their (already verified) shards."""
        matrix = np.empty((len(keys), self.dimension), dtype=np.float32)
        by_shard: dict[str, list[tuple[int, int]]] = {}
        for i, key in enumerate(keys):
            location = index[key]
            by_shard.setdefault(location.shard, []).append((i, location.row))
        for shard, pairs in by_shard.items():
            targets, rows = zip(*pairs, strict=True)
            matrix[list(targets)] = self._verified[shard][list(rows)]
        return matrix


def _read_listing(shard: Path) -> _Listing:
    """A shard's recorded compute time and text keys; CorruptEntry when malformed."""
    meta = read_meta(shard)
    keys = read_shard_keys(shard)
    return _Listing(float(meta.get("compute_seconds", 0.0)), keys)


def _unique_missing(
    keys: Sequence[str], texts: Sequence[str], index: dict[str, _Row]
) -> list[tuple[str, str]]:
    seen: set[str] = set()
    missing = []
    for key, text in zip(keys, texts, strict=True):
        if key not in index and key not in seen:
            seen.add(key)
            missing.append((key, text))
    return missing
