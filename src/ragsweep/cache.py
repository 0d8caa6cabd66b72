"""Stage caches keyed by config hashes (see docs/caching.md).

An entry is a directory ``<cache_dir>/<stage>/<key[:2]>/<key>/`` holding data files and a
``meta.json`` with each file's sha256. Entries are written into a temporary directory and
renamed into place, so a reader sees a whole entry or none; every file is verified against
its checksum on read, and a corrupt entry is reported, removed and recomputed, never
served. Builders of the same key in parallel processes serialize on a lock file: one
computes, the others wait and then read its entry.

Dense vectors are content-addressed per text in :class:`EmbeddingStore`: one store per
model identity, shards of (text sha256 → row) written as ``.npy`` (memory-mappable, no
pickles), so every distinct text is embedded once across all configurations of a sweep.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ragsweep import __version__
from ragsweep.hashing import sha256_file, sha256_text

log = logging.getLogger(__name__)
T = TypeVar("T")
META = "meta.json"


@dataclass
class StageStats:
    """Per-stage counters for one run. ``seconds_saved`` sums the recorded compute time of
    the entries (or texts) that were served from the cache."""

    hits: int = 0
    misses: int = 0
    seconds_saved: float = 0.0
    corrupt: int = 0


@dataclass
class CacheStats:
    stages: dict[str, StageStats] = field(default_factory=dict)

    def stage(self, name: str) -> StageStats:
        return self.stages.setdefault(name, StageStats())

    def as_metrics(self) -> dict[str, float]:
        """``cache/<stage>/hits``, ``.../misses``, ``.../seconds_saved``, ``.../corrupt``."""
        out: dict[str, float] = {}
        for name, s in sorted(self.stages.items()):
            out[f"cache/{name}/hits"] = float(s.hits)
            out[f"cache/{name}/misses"] = float(s.misses)
            out[f"cache/{name}/seconds_saved"] = round(s.seconds_saved, 3)
            out[f"cache/{name}/corrupt"] = float(s.corrupt)
        out["cache/seconds_saved"] = round(sum(s.seconds_saved for s in self.stages.values()), 3)
        return out

    def describe(self) -> str:
        """One line for the run summary, e.g. ``chunks hit, embeddings 12 hit / 3 computed``."""
        parts = []
        for name, s in sorted(self.stages.items()):
            if s.hits + s.misses <= 1:
                parts.append(f"{name} {'hit' if s.hits else 'computed'}")
            else:
                parts.append(f"{name} {s.hits} hit / {s.misses} computed")
        saved = sum(s.seconds_saved for s in self.stages.values())
        return ", ".join(parts) + f" (saved ~{saved:.1f} s)"


class CorruptEntry(Exception):
    """An entry whose files do not match their recorded checksums."""


class StageCache:
    """Directory entries per (stage, key). With ``root=None`` every lookup is a miss and
    nothing is written (``cache.enabled=false``)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self.stats = CacheStats()

    @property
    def enabled(self) -> bool:
        return self.root is not None

    def entry_dir(self, stage: str, key: str) -> Path:
        assert self.root is not None
        return self.root / stage / key[:2] / key

    def get_or_build(
        self,
        stage: str,
        key: str,
        build: Callable[[Path], None],
        load: Callable[[Path], T],
    ) -> T:
        """Load the entry for ``(stage, key)``, or ``build`` it into a fresh directory first.

        ``build(dir)`` writes data files into ``dir``; ``load(dir)`` reads them back.
        """
        stats = self.stats.stage(stage)
        if self.root is None:
            # No store: build into a scratch folder and load from it (a memory-mapped file
            # stays readable after the folder is removed).
            with tempfile.TemporaryDirectory(prefix="ragsweep-") as scratch:
                build(Path(scratch))
                stats.misses += 1
                return load(Path(scratch))
        with self._lock(stage, key):
            final = self.entry_dir(stage, key)
            meta = self._verified_meta(stage, final)
            if meta is not None:
                touch(final)
                stats.hits += 1
                stats.seconds_saved += float(meta.get("compute_seconds", 0.0))
                return load(final)
            self._write_entry(stage, final, build, {"key": key})
            stats.misses += 1
            return load(final)

    def _verified_meta(self, stage: str, entry: Path) -> dict[str, Any] | None:
        if not entry.exists():
            return None
        try:
            return verify_entry(entry)
        except CorruptEntry as exc:
            log.warning("cache: %s entry %s is corrupt (%s): recomputing", stage, entry.name, exc)
            self.stats.stage(stage).corrupt += 1
            remove_entry(entry)
            return None

    def _write_entry(
        self, stage: str, final: Path, build: Callable[[Path], None], extra: dict[str, Any]
    ) -> None:
        assert self.root is not None
        tmp = self.root / stage / f".tmp-{uuid.uuid4().hex}"
        tmp.mkdir(parents=True)
        try:
            started = time.perf_counter()
            build(tmp)
            seal_entry(tmp, stage, time.perf_counter() - started, extra)
            final.parent.mkdir(parents=True, exist_ok=True)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @contextmanager
    def _lock(self, stage: str, key: str) -> Iterator[None]:
        assert self.root is not None
        lock_dir = self.root / stage / ".locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        with open(lock_dir / f"{key}.lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- typed helpers ------------------------------------------------------------------

    def json_value(
        self,
        stage: str,
        key: str,
        compute: Callable[[], T],
        encode: Callable[[T], Any],
        decode: Callable[[Any], T],
    ) -> T:
        """A JSON-serializable value; ``compute`` runs only on a miss."""
        computed: list[T] = []

        def build(folder: Path) -> None:
            computed.append(compute())
            write_json(folder / "data.json", encode(computed[0]))

        def load(folder: Path) -> T:
            if computed:
                return computed[0]
            return decode(json.loads((folder / "data.json").read_text(encoding="utf-8")))

        return self.get_or_build(stage, key, build, load)


def write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")


def seal_entry(folder: Path, stage: str, seconds: float, extra: dict[str, Any]) -> None:
    """Record every data file's sha256 in ``meta.json`` (written last)."""
    files = {
        p.relative_to(folder).as_posix(): sha256_file(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != META
    }
    meta = {
        "stage": stage,
        "files": files,
        "compute_seconds": round(seconds, 4),
        "created": time.time(),
        "ragsweep_version": __version__,
        **extra,
    }
    write_json(folder / META, meta)


def verify_entry(folder: Path) -> dict[str, Any]:
    """Return the entry's meta if every file matches its checksum, else raise CorruptEntry."""
    try:
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptEntry(f"unreadable {META}: {exc}") from None
    files = meta.get("files") if isinstance(meta, dict) else None
    if not isinstance(files, dict) or not files:
        raise CorruptEntry(f"{META} lists no files")
    for name, digest in files.items():
        path = folder / name
        if not path.is_file():
            raise CorruptEntry(f"{name} is missing")
        if sha256_file(path) != digest:
            raise CorruptEntry(f"{name} does not match its checksum")
    return meta


def touch(folder: Path) -> None:
    """Mark an entry as used now (``ragsweep-cache prune`` goes by last use)."""
    with contextlib.suppress(OSError):  # a read-only cache is still usable
        os.utime(folder)


def remove_entry(folder: Path) -> None:
    """Move an entry aside atomically, then delete it (readers never see half of it)."""
    trash = folder.parent / f".trash-{uuid.uuid4().hex}"
    try:
        os.rename(folder, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


# --- content-addressed embeddings -----------------------------------------------------


@dataclass(frozen=True)
class _Row:
    shard: str
    row: int


class EmbeddingStore:
    """Vectors of one model identity, addressed by the sha256 of the exact embedded text.

    ``embed(texts, encode)`` returns one row per text; only texts never embedded before
    with this model are passed to ``encode``, as one new shard. Several processes may add
    shards for the same texts at once: each shard is complete and verified on its own, and
    identical texts give identical rows, so duplicates are harmless (the first one wins).
    """

    def __init__(self, cache: StageCache, model_key: str, dimension: int) -> None:
        self.cache = cache
        self.model_key = model_key
        self.dimension = dimension
        self._verified: dict[str, np.ndarray] = {}
        self._seconds_per_text = 0.0
        self._known: dict[str, _Row] | None = None  # shard index; rescanned on a miss
        self._computed = (0.0, 0)  # compute seconds and rows of the shards in _known

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
        for attempt in range(2):  # a second pass only after dropping a corrupt shard
            fresh = attempt > 0 or self._known is None
            index = self._index(rescan=fresh)
            missing = _unique_missing(keys, texts, index)
            if missing and not fresh:  # another process may have written them meanwhile
                index = self._index(rescan=True)
                missing = _unique_missing(keys, texts, index)
            if missing:
                started = time.perf_counter()
                vectors = encode([text for _, text in missing])
                self._add_shard([k for k, _ in missing], vectors, time.perf_counter() - started)
                index = self._index(rescan=False)
            try:
                matrix = self._gather(keys, index)
            except CorruptEntry:
                stats.corrupt += 1
                continue
            distinct = len(set(keys))
            stats.misses += len(missing)
            stats.hits += distinct - len(missing)
            stats.seconds_saved += self._seconds_per_text * (distinct - len(missing))
            return matrix
        raise CorruptEntry(f"embedding store {self.folder} keeps failing verification")

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
        folder = self.folder
        if folder is None or not folder.exists():
            return index
        total_seconds, total_rows = 0.0, 0
        shards = (p for p in folder.iterdir() if not p.name.startswith("."))  # no tmp/trash
        for shard in sorted(p for p in shards if (p / META).is_file()):
            try:
                meta = json.loads((shard / META).read_text(encoding="utf-8"))
                keys = json.loads((shard / "keys.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # verified (and removed if corrupt) when a row of it is needed
            total_seconds += float(meta.get("compute_seconds", 0.0))
            total_rows += len(keys)
            for row, key in enumerate(keys):
                index.setdefault(key, _Row(shard.name, row))
        self._set_computed(total_seconds, total_rows)
        return index

    def _set_computed(self, seconds: float, rows: int) -> None:
        self._computed = (seconds, rows)
        self._seconds_per_text = seconds / rows if rows else 0.0

    def _add_shard(self, keys: list[str], vectors: np.ndarray, seconds: float) -> None:
        """Write a shard of new rows and add it to the in-memory index, without reading
        the folder or the shard back (its rows are the vectors in hand)."""
        vectors = self._checked(vectors, len(keys))
        name = self._write_shard(keys, vectors, seconds)
        assert self._known is not None
        for row, key in enumerate(keys):
            self._known.setdefault(key, _Row(name, row))
        self._verified[name] = vectors
        total_seconds, total_rows = self._computed
        self._set_computed(total_seconds + seconds, total_rows + len(keys))

    def _write_shard(self, keys: list[str], vectors: np.ndarray, seconds: float) -> str:
        """Write ``vectors`` (already checked) as a new shard; return its name."""
        folder = self.folder
        assert folder is not None
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        tmp = folder / f".tmp-{name}"
        tmp.mkdir(parents=True)
        try:
            np.save(tmp / "vectors.npy", vectors, allow_pickle=False)
            write_json(tmp / "keys.json", keys)
            seal_entry(tmp, "embeddings", seconds, {"rows": len(keys), "dim": self.dimension})
            os.rename(tmp, folder / name)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return name

    def _gather(self, keys: Sequence[str], index: dict[str, _Row]) -> np.ndarray:
        matrix = np.empty((len(keys), self.dimension), dtype=np.float32)
        by_shard: dict[str, list[tuple[int, int]]] = {}
        for i, key in enumerate(keys):
            location = index[key]
            by_shard.setdefault(location.shard, []).append((i, location.row))
        for shard, pairs in by_shard.items():
            vectors = self._shard_vectors(shard)
            targets, rows = zip(*pairs, strict=True)
            matrix[list(targets)] = vectors[list(rows)]
        return matrix

    def _shard_vectors(self, shard: str) -> np.ndarray:
        if shard not in self._verified:
            assert self.folder is not None
            path = self.folder / shard
            try:
                verify_entry(path)
            except CorruptEntry as exc:
                log.warning("cache: embedding shard %s is corrupt (%s): recomputing", shard, exc)
                remove_entry(path)
                raise
            touch(path)
            self._verified[shard] = np.load(path / "vectors.npy", mmap_mode="r")
        return self._verified[shard]


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
