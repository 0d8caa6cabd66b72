"""The stage cache: entries keyed by config hashes (see docs/caching.md), and its per-run
counters.

An entry is a directory ``<cache_dir>/<stage>/<key[:2]>/<key>/`` holding data files and a
``meta.json`` with each file's sha256 (its form: :mod:`ragsweep.cache.entries`). Entries
are written into a temporary directory and renamed into place, so a reader sees a whole
entry or none; every file is verified against its checksum on read (once per version of
the file when fingerprints are trusted), and a corrupt or malformed entry is reported,
removed and recomputed, never served. Builders of the same key in parallel processes
serialize on a lock file (:mod:`ragsweep.core.locks`): one computes, the others wait and
then read its entry; a builder the lock did not exclude (a file system whose locks do not
reach across hosts) loses the rename and uses the stored entry (docs/caching.md, "Sharing
a cache between workers"). A store that refuses writes (read-only) is still used for
reading; a full disk is a CacheError naming ``cache.dir`` and what to do (docs/caching.md,
"What happens when..."). Dense vectors are stored per text by
:class:`ragsweep.cache.embeddings.EmbeddingStore`, on top of this cache.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from ragsweep.cache.entries import (
    LOCKS,
    META,
    CorruptEntry,
    entry_temp_name,
    lock_path,
    remove_entry,
    seal_entry,
    touch,
    verify_entry,
    verify_entry_once,
    write_json,
)
from ragsweep.core import locks
from ragsweep.core.disk import is_out_of_space_error, is_read_only_error
from ragsweep.core.errors import CacheError

log = logging.getLogger(__name__)
T = TypeVar("T")
_TAKEN_ERRNOS = frozenset({errno.ENOTEMPTY, errno.EEXIST})
"""What renaming a folder onto an existing non-empty one raises."""


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
    """Per-stage counters of one run; ``read_only`` is True once the store refused a write
    (nothing new was stored)."""

    stages: dict[str, StageStats] = field(default_factory=dict)
    read_only: bool = False

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
        note = "; read-only store: nothing new stored" if self.read_only else ""
        return ", ".join(parts) + f" (saved ~{saved:.1f} s{note})"


def check_cache_dir(root: Path) -> None:
    """Raise CacheError unless ``root`` is a directory or could be created as one."""
    for candidate in (root, *root.parents):
        if not candidate.exists():
            continue
        if candidate.is_dir():
            return
        where = "is a file" if candidate == root else f"cannot be created: {candidate} is a file"
        raise CacheError(
            f"cache.dir={root} {where}, not a directory; point cache.dir at a directory "
            "(it is created if missing) or run with cache.enabled=false"
        )


def out_of_space(root: Path, what: str, exc: OSError) -> CacheError:
    """The error for a full disk under the cache: names ``cache.dir`` and what to do."""
    return CacheError(
        f"cache.dir={root}: no space left on the device while storing {what} ({exc}); free "
        f"space (e.g. ragsweep-cache --cache-dir {root} prune --older-than 30d), point "
        "cache.dir at a disk with room, or run with cache.enabled=false"
    )


_MALFORMED_PAYLOAD = (ValueError, KeyError, TypeError, IndexError, OSError)
"""What reading a checksum-valid entry raises when its content is not what the stage wrote
(the entry is then treated as corrupt and recomputed). DriftError is not among them."""


class StageCache:
    """Directory entries per (stage, key). With ``root=None`` every lookup is a miss and
    nothing is written (``cache.enabled=false``).

    A store that refuses writes (read-only mount, no permission) is still used: its
    entries are served, misses are computed in a scratch folder and not stored
    (``read_only`` becomes True and a warning names the folder once). A full disk raises
    CacheError naming ``cache.dir``.
    """

    def __init__(self, root: Path | None, trust_fingerprints: bool = False) -> None:
        if root is not None:
            check_cache_dir(root)
        self.root = root
        self.trust_fingerprints = trust_fingerprints
        """Skip hashing an entry's files whose fingerprints are those they had when they
        were last hashed and found intact (:data:`VERIFIED`): ``cache.trust_mtime``."""
        self.stats = CacheStats()
        self._warned_no_locks = False

    @property
    def enabled(self) -> bool:
        return self.root is not None

    @property
    def read_only(self) -> bool:
        """True once the store refused a write: nothing new is stored in this run."""
        return self.stats.read_only

    def mark_read_only(self, exc: OSError) -> None:
        """Stop trying to write to the store, with one warning naming it."""
        if not self.stats.read_only:
            log.warning(
                "cache: %s refuses writes (%s): its entries are used, new ones are computed "
                "but not stored; make it writable or point cache.dir elsewhere to store them",
                self.root,
                exc.strerror or exc,
            )
        self.stats.read_only = True

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
        if self.root is None:
            return self._build_scratch(stage, build, load)
        with self._lock(stage, key):
            final = self.entry_dir(stage, key)
            found = self._load_hit(stage, final, load)
            if found:
                return found[0]
            if self.read_only or final.exists() or not self._write_entry(stage, final, build, key):
                return self._build_scratch(stage, build, load)
            self.stats.stage(stage).misses += 1
            return load(final)

    def _store_built(self, tmp: Path, final: Path) -> None:
        """Rename the sealed entry ``tmp`` into place. If another writer stored the same key
        meanwhile (its lock did not exclude this one: see :meth:`_lock`), its entry is kept
        and this one discarded: both were built from the same inputs, and a reader sees one
        whole entry either way."""
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(tmp, final)
        except OSError as exc:
            if exc.errno not in _TAKEN_ERRNOS or not (final / META).is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
            log.warning(
                "cache: another worker stored %s while this one built it (the lock on %s did "
                "not exclude it); its entry is used. Work is done twice when locks do not "
                "work across hosts: docs/caching.md, 'Sharing a cache between workers'",
                final,
                self.root,
            )

    def _build_scratch(
        self, stage: str, build: Callable[[Path], None], load: Callable[[Path], T]
    ) -> T:
        """Build into a scratch folder and load from it, storing nothing (a memory-mapped
        file stays readable after the folder is removed)."""
        with tempfile.TemporaryDirectory(prefix="ragsweep-") as scratch:
            build(Path(scratch))
            self.stats.stage(stage).misses += 1
            return load(Path(scratch))

    def _load_hit(self, stage: str, entry: Path, load: Callable[[Path], T]) -> tuple[T] | None:
        """``(value,)`` for a valid entry, or None: missing, or corrupt (then discarded)."""
        if not entry.exists():
            return None
        try:
            meta = verify_entry_once(entry) if self.trust_fingerprints else verify_entry(entry)
            value = load(entry)
        except CorruptEntry as exc:
            self._discard(stage, entry, str(exc))
            return None
        except _MALFORMED_PAYLOAD as exc:
            self._discard(stage, entry, f"unreadable content: {type(exc).__name__}: {exc}")
            return None
        touch(entry)
        stats = self.stats.stage(stage)
        stats.hits += 1
        stats.seconds_saved += float(meta.get("compute_seconds", 0.0))
        return (value,)

    def _discard(self, stage: str, entry: Path, reason: str) -> None:
        self.stats.stage(stage).corrupt += 1
        if remove_entry(entry):
            log.warning(
                "cache: %s entry %s is corrupt (%s): removed, recomputing", stage, entry, reason
            )
            return
        log.warning(
            "cache: %s entry %s is corrupt (%s) and cannot be removed: recomputing without "
            "storing; run ragsweep-cache --cache-dir %s verify where the store is writable",
            stage,
            entry,
            reason,
            self.root,
        )

    def _write_entry(
        self, stage: str, final: Path, build: Callable[[Path], None], key: str
    ) -> bool:
        """Build and seal a new entry, then rename it into place. False (nothing built) when
        the store refuses writes; CacheError when the disk is full."""
        assert self.root is not None
        tmp = self.root / stage / entry_temp_name(key)
        if not self.make_dir(tmp, f"a {stage} entry"):
            return False
        try:
            started = time.perf_counter()
            build(tmp)
            seal_entry(tmp, stage, time.perf_counter() - started, {"key": key})
            self._store_built(tmp, final)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if is_out_of_space_error(exc, tmp.parent):
                raise out_of_space(self.root, f"a {stage} entry", exc) from exc
            raise
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return True

    def make_dir(self, folder: Path, what: str) -> bool:
        """Create ``folder`` (and parents); False if the store refuses writes."""
        assert self.root is not None
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if is_read_only_error(exc):
                self.mark_read_only(exc)
                return False
            if is_out_of_space_error(exc, self.root):
                raise out_of_space(self.root, what, exc) from exc
            raise
        return True

    @contextmanager
    def _lock(self, stage: str, key: str) -> Iterator[None]:
        """Exclusive per-key lock; none in a store that refuses writes (nothing is written
        to it, and readers always see whole entries)."""
        assert self.root is not None
        lock_dir = self.root / stage / LOCKS
        handle = None
        if not self.read_only and self.make_dir(lock_dir, "a lock file"):
            handle = self._open_lock(lock_path(lock_dir.parent, key))
        if handle is None:
            yield
            return
        with handle:
            locked = self._acquire(handle)
            try:
                yield
            finally:
                if locked:
                    locks.release(handle)

    def _acquire(self, handle: IO[str]) -> bool:
        """Take the exclusive lock on an open lock file; False (with one warning) when the
        file system has no working locks (:class:`ragsweep.core.locks.NoLocks`: an NFS mount
        without its lock service, Lustre mounted ``noflock``): builders of one key then may
        compute it twice, and the first rename wins (:meth:`_store_built`)."""
        try:
            locks.acquire(handle)
        except locks.NoLocks as exc:
            self._warn_no_locks(exc)
            return False
        return True

    def _warn_no_locks(self, exc: OSError) -> None:
        """One warning per cache that its file system has no working locks."""
        if not self._warned_no_locks:
            log.warning(
                "cache: %s has no working file locks (%s): workers may build the same "
                "entry twice (never a torn one); docs/caching.md, 'Sharing a cache "
                "between workers'",
                self.root,
                exc.strerror or exc,
            )
        self._warned_no_locks = True

    def _open_lock(self, path: Path) -> IO[str] | None:
        assert self.root is not None
        try:
            return open(path, "a+")  # closed by _lock
        except OSError as exc:
            if is_read_only_error(exc):
                self.mark_read_only(exc)
                return None
            if is_out_of_space_error(exc, self.root):
                raise out_of_space(self.root, "a lock file", exc) from exc
            raise

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
