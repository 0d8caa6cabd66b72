"""``ragsweep-cache``: inspect and prune the stage cache.

    ragsweep-cache stats                 entries, sizes and last use per stage
    ragsweep-cache prune --older-than 30d   remove entries not used for 30 days
    ragsweep-cache verify                check every entry's checksums, remove corrupt ones

The cache directory defaults to ``<project root>/outputs/cache`` (``paths.cache_dir``);
``--cache-dir`` points elsewhere.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragsweep.cache.entries import (
    META,
    VERIFIED,
    CorruptEntry,
    builder_alive,
    remove_entry,
    verify_stage_entry,
)
from ragsweep.config.app import project_root

_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
STALE_TEMP_SECONDS = 3600  # a writer that left a temp dir this old has died


@dataclass(frozen=True)
class Entry:
    stage: str
    path: Path
    bytes: int
    last_used: float


def parse_age(text: str) -> float:
    """``30d`` → seconds. Units: s, m, h, d, w."""
    match = _AGE.match(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not an age like 30d, 12h or 2w")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def iter_entries(root: Path) -> Iterator[Entry]:
    """Every complete entry (a folder with meta.json), embedding shards included."""
    for meta in sorted(root.rglob(META)):
        folder = meta.parent
        stage = folder.relative_to(root).parts[0]
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        yield Entry(stage, folder, size, folder.stat().st_mtime)


def stale_temporaries(root: Path, now: float) -> list[Path]:
    """Temporaries whose writer has died: unchanged for :data:`STALE_TEMP_SECONDS`, and
    for an entry folder, its key's lock not held (:func:`ragsweep.cache.entries.builder_alive`),
    so an entry being built is never one however long it computes. The age is still
    required of a folder whose lock is free: on a file system whose locks do not reach
    across hosts, a builder on another host holds only its own host's lock."""
    leftovers = [p for p in root.rglob(".tmp-*") if p.is_dir()]
    leftovers += [p for p in root.rglob(".trash-*") if p.is_dir()]
    leftovers += [p for p in root.rglob(f"{VERIFIED}.tmp-*") if p.is_file()]  # a killed write
    return [p for p in leftovers if _is_stale(p, now)]


def _is_stale(path: Path, now: float) -> bool:
    if now - _mtime(path, now) <= STALE_TEMP_SECONDS:
        return False
    return not (path.is_dir() and builder_alive(path))


def _mtime(path: Path, now: float) -> float:
    """``path``'s modification time; ``now`` when it is gone (its writer just finished)."""
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return now


def remove_temporary(path: Path) -> bool:
    """Remove a leftover temporary (:func:`stale_temporaries`): a folder as an entry is
    removed, a file unlinked. False when the store refused."""
    if path.is_dir():
        return remove_entry(path)
    try:
        path.unlink(missing_ok=True)
    except OSError:
        return False
    return True


def command_stats(root: Path) -> int:
    entries = list(iter_entries(root))
    if not entries:
        print(f"{root}: empty")
        return 0
    now = time.time()
    print(f"{root}")
    print(f"  {'stage':<18}{'entries':>8}{'size':>12}{'newest use':>14}{'oldest use':>14}")
    for stage in sorted({e.stage for e in entries}):
        group = [e for e in entries if e.stage == stage]
        newest = now - max(e.last_used for e in group)
        oldest = now - min(e.last_used for e in group)
        size = sum(e.bytes for e in group)
        print(f"  {stage:<18}{len(group):>8}{_size(size):>12}{_ago(newest):>14}{_ago(oldest):>14}")
    print(f"  {'total':<18}{len(entries):>8}{_size(sum(e.bytes for e in entries)):>12}")
    return 0


def command_prune(root: Path, older_than: float, dry_run: bool) -> int:
    now = time.time()
    doomed = [e for e in iter_entries(root) if now - e.last_used > older_than]
    temporaries = stale_temporaries(root, now)
    wanted = len(doomed) + len(temporaries)
    if not dry_run:
        doomed = [e for e in doomed if remove_entry(e.path)]
        temporaries = [t for t in temporaries if remove_temporary(t)]
    freed = sum(e.bytes for e in doomed)
    verb = "would remove" if dry_run else "removed"
    print(
        f"{verb} {len(doomed)} entries ({_size(freed)}) unused for more than "
        f"{_ago(older_than)}, and {len(temporaries)} leftover temporaries"
    )
    kept = wanted - len(doomed) - len(temporaries)
    if kept:
        print(f"could not remove {kept} of them: {root} refuses writes (read-only?)")
        return 1
    return 0


def command_verify(root: Path) -> int:
    """Check every entry (checksums, metadata, shard layout); remove the corrupt ones.

    Exit status 1 when anything was corrupt; a corrupt entry that cannot be removed (a
    read-only store) is reported as kept.
    """
    corrupt = 0
    entries = list(iter_entries(root))
    for entry in entries:
        try:
            verify_stage_entry(entry.stage, entry.path)
        except CorruptEntry as exc:
            corrupt += 1
            outcome = "removed" if remove_entry(entry.path) else "NOT removed: store is read-only"
            print(f"corrupt: {entry.path} ({exc}); {outcome}")
    print(f"checked {len(entries)} entries, {corrupt} corrupt")
    return 1 if corrupt else 0


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _ago(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def default_cache_dir() -> Path:
    return Path(project_root()) / "outputs" / "cache"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragsweep-cache", description=__doc__.split("\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=None, help="default: outputs/cache")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("stats", help="entries, sizes and last use per stage")
    prune = sub.add_parser("prune", help="remove entries not used recently")
    prune.add_argument(
        "--older-than", type=parse_age, required=True, metavar="AGE", help="e.g. 30d, 12h, 2w"
    )
    prune.add_argument("--dry-run", action="store_true")
    sub.add_parser("verify", help="check every entry's checksums; remove corrupt ones")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    root: Path = args.cache_dir or default_cache_dir()
    if not root.exists():
        print(f"{root}: no cache yet")
        return 0
    if not root.is_dir():
        print(f"error: --cache-dir {root} is a file, not a cache directory", file=sys.stderr)
        return 2
    return COMMANDS[args.command](root, args)


COMMANDS: dict[str, Callable[[Path, argparse.Namespace], int]] = {
    "stats": lambda root, args: command_stats(root),
    "prune": lambda root, args: command_prune(root, args.older_than, args.dry_run),
    "verify": lambda root, args: command_verify(root),
}


if __name__ == "__main__":
    sys.exit(main())
