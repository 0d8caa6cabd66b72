"""Fixtures that make faults real: read-only and size-limited file systems (mounted, so
they hold for root too), and the ``ragsweep`` commands run as a user runs them."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
MountFn = Callable[..., Path]


def run_command(name: str, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run console script ``name`` (ragsweep, ragsweep-cache) in a subprocess; MLflow goes
    only where the arguments say."""
    environment = {**os.environ, "MLFLOW_TRACKING_URI": "", **env}
    environment.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [str(BIN / name), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=300,
    )


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(
            f"cannot mount file systems here (mount {' '.join(args)}: {done.stderr.strip()})"
        )


@pytest.fixture
def mounts() -> Iterator[MountFn]:
    """``mounts(point, kind, source=None, size=None)`` mounts a real file system at
    ``point`` and unmounts it after the test:

    - ``kind="ro-bind"``: ``source`` seen read-only at ``point`` (a bind mount remounted
      ``ro``: writes fail with EROFS, for root too);
    - ``kind="ro-tmpfs"``: an empty read-only tmpfs;
    - ``kind="tmpfs"``: a writable tmpfs of ``size`` (e.g. ``"256k"``), to fill up.
    """
    if shutil.which("mount") is None:
        pytest.skip("the mount command is not installed")
    mounted: list[Path] = []

    def mount(point: Path, kind: str, source: Path | None = None, size: str = "1m") -> Path:
        point.mkdir(parents=True, exist_ok=True)
        if kind == "ro-bind":
            assert source is not None
            _mount("--bind", str(source), str(point))
            mounted.append(point)
            _mount("-o", "remount,bind,ro", str(point))
        elif kind == "ro-tmpfs":
            _mount("-t", "tmpfs", "-o", f"ro,size={size}", "tmpfs", str(point))
            mounted.append(point)
        else:
            _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point))
            mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        done = subprocess.run(["umount", str(point)], capture_output=True)
        if done.returncode != 0:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


def fill(folder: Path, leave_bytes: int) -> None:
    """Fill the file system holding ``folder`` until about ``leave_bytes`` remain free."""
    usage = shutil.disk_usage(folder)
    filler = usage.free - leave_bytes
    if filler > 0:
        with (folder / "filler.bin").open("wb") as handle:
            handle.write(b"\0" * filler)


def files_containing(root: Path, needle: bytes) -> list[Path]:
    """Every file below ``root`` whose bytes (a ``.gz`` file's decompressed, as MLflow stores
    ``cases.jsonl`` and ``chunks.jsonl``) contain ``needle``."""
    return [p for p in root.rglob("*") if p.is_file() and needle in file_content(p)]


def file_content(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.suffix == ".gz" else raw
