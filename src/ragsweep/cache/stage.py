"""Stage caches keyed by config hashes (see docs/caching.md).

An entry is a directory ``<cache_dir>/<stage>/<key[:2]>/<key>/`` holding data files and a
``meta.json`` with each file's sha256. Entries are written into a temporary directory and
renamed into place, so a reader sees a whole entry or none; every file is verified against
its checksum on read (once per version of the file when fingerprints are trusted:
:func:`verify_entry_once`), and a corrupt or malformed entry is reported, removed and
recomputed, never served. Builders of the same key in parallel processes serialize on a
lock file: one computes, the others wait and then read its entry; a builder the lock did
not exclude (a file system whose locks do not reach across hosts) loses the rename and
uses the stored entry (docs/caching.md, "Sharing a cache between workers"). A store that
refuses writes (read-only) is still used for reading; a full disk is a CacheError naming
``cache.dir`` and what to do (docs/caching.md, "What happens when...").

Dense vectors are content-addressed per text in :class:`EmbeddingStore`: one store per
model identity, shards of (text sha256 → row) written as ``.npy`` (memory-mappable, no
pickles), so every distinct text is embedded once across all configurations of a sweep.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, TypeVar

import numpy as np

from ragsweep import __version__
from ragsweep.core.errors import CacheError
from ragsweep.core.hashing import sha256_file, sha256_text

log = logging.getLogger(__name__)
T = TypeVar("T")
META = "meta.json"
VERIFIED = ".verified.json"
"""In an entry, written after its files were all hashed and found intact: the sha256 of
its ``meta.json`` and each file's fingerprint (:func:`stat_fingerprint`) as it was then.
With fingerprints trusted (``cache.trust_mtime``), a file whose fingerprint is still that
is not hashed again (docs/caching.md, "What is verified on read")."""


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


class CorruptEntry(Exception):
    """An entry whose files do not match their recorded checksums or whose metadata or
    layout is malformed."""


_READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_TAKEN_ERRNOS = frozenset({errno.ENOTEMPTY, errno.EEXIST})
"""What renaming a folder onto an existing non-empty one raises."""
_NO_LOCK_ERRNOS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS})
"""What ``flock`` raises on a file system without working locks."""
_NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
LOW_SPACE_BYTES = 1 << 20
"""Below this many free bytes, a write error without an errno counts as a full disk."""


def is_read_only_error(exc: OSError) -> bool:
    """True when ``exc`` says the file system or directory refuses writes."""
    return exc.errno in _READ_ONLY_ERRNOS


def is_out_of_space_error(exc: OSError, folder: Path) -> bool:
    """True when ``exc`` comes from a full disk (or quota) under ``folder``.

    numpy reports a short write as a plain ``OSError("62464 requested and 18400 written")``
    without an errno, so a plain OSError without one counts when ``folder``'s file system
    has less than :data:`LOW_SPACE_BYTES` free.
    """
    if exc.errno in _NO_SPACE_ERRNOS:
        return True
    return type(exc) is OSError and exc.errno is None and free_bytes(folder) < LOW_SPACE_BYTES


def free_bytes(path: Path) -> int:
    """Bytes available to this user on the file system holding ``path`` (or its nearest
    existing parent); a very large number when that cannot be told."""
    for candidate in (path, *path.parents):
        try:
            info = os.statvfs(candidate)
        except OSError:
            continue
        return info.f_bavail * info.f_frsize
    return 1 << 62


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
            locked = self._flock(handle)
            try:
                yield
            finally:
                if locked:
                    fcntl.flock(handle, fcntl.LOCK_UN)

    def _flock(self, handle: IO[str]) -> bool:
        """Take the exclusive ``flock`` on an open lock file; False (with one warning) when
        the file system has no working locks (an NFS mount without its lock service, Lustre
        mounted ``noflock``): builders of one key then may compute it twice, and the first
        rename wins (:meth:`_store_built`)."""
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError as exc:
            if exc.errno not in _NO_LOCK_ERRNOS:
                raise
            if not self._warned_no_locks:
                log.warning(
                    "cache: %s has no working file locks (%s): workers may build the same "
                    "entry twice (never a torn one); docs/caching.md, 'Sharing a cache "
                    "between workers'",
                    self.root,
                    exc.strerror or exc,
                )
            self._warned_no_locks = True
            return False
        return True

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


_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def read_meta(folder: Path) -> dict[str, Any]:
    """The entry's ``meta.json`` if it is well formed (a ``files`` map of relative file
    names to sha256 digests, ``compute_seconds`` a number >= 0), else CorruptEntry.
    Checksums are not compared here (:func:`verify_entry` does)."""
    try:
        raw = (folder / META).read_bytes()
    except OSError as exc:
        raise CorruptEntry(f"unreadable {META}: {exc}") from None
    return _parse_meta(raw)


def _parse_meta(raw: bytes) -> dict[str, Any]:
    """:func:`read_meta` of the bytes of a ``meta.json``."""
    try:
        meta = json.loads(raw.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError is one
        raise CorruptEntry(f"unreadable {META}: {exc}") from None
    if not isinstance(meta, dict):
        raise CorruptEntry(f"{META} is a JSON {type(meta).__name__}, not an object")
    files = meta.get("files")
    if not isinstance(files, dict) or not files:
        raise CorruptEntry(f"{META} lists no files")
    for name, digest in files.items():
        if not _is_member_name(name):
            raise CorruptEntry(f"{META} lists {name!r}, which is not a file inside the entry")
        if not isinstance(digest, str) or not _SHA256_HEX.fullmatch(digest):
            raise CorruptEntry(f"{META}: the checksum of {name} is not a sha256 digest")
    seconds = meta.get("compute_seconds", 0.0)
    if not _is_seconds(seconds):
        raise CorruptEntry(f"{META}: compute_seconds={seconds!r} is not a number >= 0")
    return meta


def _is_member_name(name: object) -> bool:
    """A relative POSIX path inside the entry (no ``..``, not absolute, not meta.json)."""
    if not isinstance(name, str) or not name or name == META:
        return False
    path = PurePosixPath(name)
    return not path.is_absolute() and all(part not in ("", ".", "..") for part in name.split("/"))


def _is_seconds(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def verify_entry(folder: Path) -> dict[str, Any]:
    """Return the entry's meta if it is well formed (:func:`read_meta`) and every file
    matches its checksum, else raise CorruptEntry."""
    meta = read_meta(folder)
    for name, digest in meta["files"].items():
        path = folder / name
        if not path.is_file():
            raise CorruptEntry(f"{name} is missing")
        if sha256_file(path) != digest:
            raise CorruptEntry(f"{name} does not match its checksum")
    return meta


def verify_entry_once(folder: Path) -> dict[str, Any]:
    """:func:`verify_entry`, hashing only files changed since the entry was last found
    intact: when ``meta.json`` has the digest and every file the fingerprint recorded in
    :data:`VERIFIED`, nothing is hashed; otherwise every file is, and on success the
    record is (re)written (when the store allows).

    Any write to a file changes its ``ctime_ns`` (which no tool sets back) and replacing
    it changes the inode, so a changed file is hashed again; what this does not see is
    damage that leaves the fingerprint alone (a failing disk): ``ragsweep-cache verify``
    and ``cache.trust_mtime=false`` hash every file. Fingerprints are taken before the
    files are hashed, so a file changed meanwhile is hashed again on the next read.
    """
    try:
        raw = (folder / META).read_bytes()
    except OSError as exc:
        raise CorruptEntry(f"unreadable {META}: {exc}") from None
    meta = _parse_meta(raw)
    seen = {"meta": hashlib.sha256(raw).hexdigest(), "files": _fingerprints(folder, meta)}
    if _recorded_verification(folder) == seen:
        return meta
    verify_entry(folder)
    _record_verification(folder, seen)
    return meta


def _fingerprints(folder: Path, meta: dict[str, Any]) -> dict[str, list[int]]:
    """Each listed file's fingerprint; CorruptEntry when one is missing."""
    found = {}
    for name in meta["files"]:
        try:
            info = (folder / name).stat()
        except OSError:
            raise CorruptEntry(f"{name} is missing") from None
        found[name] = stat_fingerprint(info)
    return found


def stat_fingerprint(info: os.stat_result) -> list[int]:
    """What identifies one version of a file without reading it: size, ``mtime_ns``,
    ``ctime_ns``, inode, device."""
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


def _recorded_verification(folder: Path) -> Any:
    """The content of the entry's :data:`VERIFIED` record; None when there is none or it
    is unreadable (then the entry is hashed, as without one)."""
    try:
        return json.loads((folder / VERIFIED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _record_verification(folder: Path, seen: dict[str, Any]) -> None:
    """Write :data:`VERIFIED` atomically; silently nothing when the store refuses (a
    read-only cache then hashes on every read, as before)."""
    tmp = folder / f"{VERIFIED}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        tmp.write_text(json.dumps(seen), encoding="utf-8")
        os.replace(tmp, folder / VERIFIED)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


LOCKS = ".locks"
"""A stage's folder of per-key lock files."""
ENTRY_TEMP_PREFIX = ".tmp-"
"""An entry being built: ``.tmp-<key>.<random>`` in its stage's folder."""


def lock_path(stage_dir: Path, key: str) -> Path:
    """The lock file a builder of ``key`` holds (``flock``, exclusive) while it builds."""
    return stage_dir / LOCKS / f"{key}.lock"


def entry_temp_name(key: str) -> str:
    """The name of a temporary entry folder for ``key``: the key is in it so that
    ``ragsweep-cache prune`` can ask the key's lock whether its builder is alive."""
    return f"{ENTRY_TEMP_PREFIX}{key}.{uuid.uuid4().hex}"


def builder_alive(temp: Path) -> bool:
    """Whether the process building into the temporary entry ``temp`` may still run: True
    when its key's lock is held (a builder holds it from before the folder exists until
    after it is renamed or removed, and the kernel drops it when the process dies). False
    when nobody holds it here, or when that cannot be asked: a name without a key (an
    embedding shard's, or written before keys were in the name), no lock file, or a file
    system without working locks."""
    key, dot, _ = temp.name.removeprefix(ENTRY_TEMP_PREFIX).rpartition(".")
    if not (temp.name.startswith(ENTRY_TEMP_PREFIX) and dot and key):
        return False
    try:
        # Shared: it conflicts with the builder's exclusive lock all the same, and NFS (which
        # emulates flock with byte-range locks) refuses an exclusive one on a file opened
        # for reading. Closing the file unlocks.
        with open(lock_path(temp.parent, key), "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def touch(folder: Path) -> None:
    """Mark an entry as used now (``ragsweep-cache prune`` goes by last use)."""
    with contextlib.suppress(OSError):  # a read-only cache is still usable
        os.utime(folder)


def remove_entry(folder: Path) -> bool:
    """Move an entry aside atomically, then delete it (readers never see half of it).

    True when the entry is gone; False when the store refused (read-only, no permission),
    in which case the entry is left as it was.
    """
    trash = folder.parent / f".trash-{uuid.uuid4().hex}"
    try:
        os.rename(folder, trash)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    shutil.rmtree(trash, ignore_errors=True)
    return True


# --- content-addressed embeddings -----------------------------------------------------


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
    keys = _read_keys(shard)
    return _Listing(float(meta.get("compute_seconds", 0.0)), keys)


def _read_keys(shard: Path) -> list[str]:
    try:
        keys = json.loads((shard / "keys.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptEntry(f"unreadable keys.json: {exc}") from None
    if not isinstance(keys, list) or not all(
        isinstance(k, str) and _SHA256_HEX.fullmatch(k) for k in keys
    ):
        raise CorruptEntry("keys.json is not a list of sha256 text keys")
    return keys


def verify_shard(shard: Path, dimension: int | None = None) -> dict[str, Any]:
    """:func:`verify_entry` for an embedding shard, plus its layout: ``keys.json`` lists
    sha256 keys and ``vectors.npy`` is float32 with one row per key and ``dimension``
    columns (the recorded ``dim`` when None). Raises CorruptEntry."""
    meta = verify_entry(shard)
    keys = _read_keys(shard)
    expected_dim = dimension if dimension is not None else meta.get("dim")
    try:
        vectors = np.load(shard / "vectors.npy", mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise CorruptEntry(f"unreadable vectors.npy: {exc}") from None
    if vectors.dtype != np.float32 or vectors.shape != (len(keys), expected_dim):
        raise CorruptEntry(
            f"vectors.npy is {vectors.dtype} {vectors.shape}, expected float32 "
            f"({len(keys)}, {expected_dim}) for {len(keys)} keys"
        )
    return meta


ENTRY_CHECKS: dict[str, Callable[[Path], dict[str, Any]]] = {"embeddings": verify_shard}
"""Stage-specific verification for ``ragsweep-cache verify``; others use verify_entry."""


def verify_stage_entry(stage: str, folder: Path) -> dict[str, Any]:
    """Verify an entry of ``stage`` as thoroughly as the store can without the stage's code."""
    return ENTRY_CHECKS.get(stage, verify_entry)(folder)


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
