"""The on-disk form of a cache entry, shared by the stage cache and the embedding store.

An entry is a folder of data files and a ``meta.json`` (written last) recording each
file's sha256; this module seals, reads, verifies (:func:`verify_entry`, or once per
version of the files: :func:`verify_entry_once`), refreshes and removes entries, checks an
embedding shard's layout (:func:`verify_shard`), and names the per-key lock files and
temporary folders that ``ragsweep-cache prune`` inspects (:func:`builder_alive`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from ragsweep import __version__
from ragsweep.core import locks
from ragsweep.core.hashing import sha256_file

META = "meta.json"
VERIFIED = ".verified.json"
"""In an entry, written after its files were all hashed and found intact: the sha256 of
its ``meta.json`` and each file's fingerprint (:func:`stat_fingerprint`) as it was then.
With fingerprints trusted (``cache.trust_mtime``), a file whose fingerprint is still that
is not hashed again (docs/caching.md, "What is verified on read")."""
LOCKS = ".locks"
"""A stage's folder of per-key lock files."""
ENTRY_TEMP_PREFIX = ".tmp-"
"""An entry being built: ``.tmp-<key>.<random>`` in its stage's folder."""
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class CorruptEntry(Exception):
    """An entry whose files do not match their recorded checksums or whose metadata or
    layout is malformed."""


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


def read_shard_keys(shard: Path) -> list[str]:
    """An embedding shard's ``keys.json``: the sha256 text key of each row; CorruptEntry
    when unreadable or not such a list."""
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
    keys = read_shard_keys(shard)
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
    system without working locks (:func:`ragsweep.core.locks.is_held`)."""
    key, dot, _ = temp.name.removeprefix(ENTRY_TEMP_PREFIX).rpartition(".")
    if not (temp.name.startswith(ENTRY_TEMP_PREFIX) and dot and key):
        return False
    return locks.is_held(lock_path(temp.parent, key)) is True
