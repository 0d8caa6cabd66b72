"""Pending markers: how a background log of one run says, beside the store, that it runs.

Every background log of a single run leaves a *pending marker* in the store's pending folder
(``mlflow.db.pending/<record id>.json``, :func:`ragsweep.tracking.store.pending_dir`) for as
long as it runs: the run takes an exclusive ``flock`` on the marker (:func:`create`) before
it starts the logger, and the logger inherits that lock, so the marker is locked exactly
while a logger is alive. A logger that succeeds removes its marker; one that fails writes
``<record id>.failed`` (the reason) beside it and leaves both (:func:`finish`). Readers of
the store wait for the locked markers (:func:`wait_running`) and report every failed or
interrupted log with the ``ragsweep-log RUN_DIR`` command that logs it
(:func:`report_failed`). This module works on the folder; which folder belongs to which
store is :mod:`ragsweep.tracking.store`'s business. See docs/tracking.md, "Background
logging".
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO

from ragsweep.core import locks
from ragsweep.core.names import RECORD_FILE
from ragsweep.core.terminal import terminal_width, wrap

MARKER_SUFFIX = ".json"
FAILED_SUFFIX = ".failed"
PROGRESS_SECONDS = 5.0
"""How often a process waiting for a logger (a reader for the pending markers, a sweep for
its logger's answers) says that it still waits."""


@dataclass(frozen=True)
class Failed:
    """A background log that ended without logging its run."""

    run_dir: str
    reason: str
    log: str


def marker_path(folder: Path, record_id: str) -> Path:
    """The marker of the background log of record ``record_id`` in ``folder``."""
    return folder / f"{record_id}{MARKER_SUFFIX}"


def create(folder: Path, record_id: str, run_dir: Path, log_file: Path) -> IO[str]:
    """Write the marker of ``record_id`` (naming ``run_dir`` and the logger's output
    ``log_file``) exclusively locked, and return its open handle: the lock lasts while the
    handle, or a process it was passed to, is open. Locked and filled before readers can
    see it (it appears under its name only then)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = folder / f".{record_id}.tmp"
    try:
        handle = written.open("w", encoding="utf-8")
        try:
            locks.acquire(handle)
            json.dump({"run_dir": str(run_dir.resolve()), "log": str(log_file.resolve())}, handle)
            handle.flush()
            written.replace(marker_path(folder, record_id))  # the lock belongs to the file
        except BaseException:
            handle.close()
            raise
    except BaseException:
        written.unlink(missing_ok=True)
        raise
    return handle


def finish(marker: Path, error: str | None) -> None:
    """Called by the logger at its end: remove the marker, or record ``error`` beside it
    (the marker stays, so readers report it)."""
    if error is None:
        marker.unlink(missing_ok=True)
        return
    marker.with_suffix(FAILED_SUFFIX).write_text(error + "\n", encoding="utf-8")


def remove(marker: Path) -> None:
    """Remove ``marker`` and its failure note."""
    marker.unlink(missing_ok=True)
    marker.with_suffix(FAILED_SUFFIX).unlink(missing_ok=True)


def forget(folder: Path, record_id: str) -> None:
    """Remove what a background log of ``record_id`` left (the record was logged another
    way): its marker and failure note, unless a logger still holds it."""
    marker = marker_path(folder, record_id)
    if marker.is_file() and _running(marker):
        return
    remove(marker)


def wait_running(folder: Path, wait_seconds: float, stream: TextIO | None = None) -> None:
    """Wait until no marker in ``folder`` is locked, saying so on ``stream`` (stderr) every
    :data:`PROGRESS_SECONDS`; :class:`~ragsweep.core.locks.LockTimeout` after
    ``wait_seconds``."""
    out = stream or sys.stderr
    started = time.monotonic()
    said = -PROGRESS_SECONDS
    while True:
        running = [m for m in _markers(folder) if _running(m)]
        if not running:
            return
        waited = time.monotonic() - started
        names = ", ".join(_run_dir(m) for m in running)
        if waited >= wait_seconds:
            raise locks.LockTimeout(
                f"waited {wait_seconds:.0f} s for {len(running)} background MLflow log(s) "
                f"to {folder.parent} ({names}); they are still running"
            )
        if waited - said >= PROGRESS_SECONDS:
            message = f"waiting for {len(running)} background MLflow log(s) to finish ({names})"
            print("\n".join(wrap(message, terminal_width())), file=out, flush=True)
            said = waited
        time.sleep(locks.POLL_SECONDS)


def report_failed(folder: Path, stream: TextIO | None = None) -> list[Failed]:
    """Report on ``stream`` (stderr) every background log in ``folder`` that ended without
    logging its run (those still running are not waited for); return them."""
    out = stream or sys.stderr
    # a marker gone once found unlocked was removed by a logger that succeeded meanwhile
    ended = [m for m in _markers(folder) if not _running(m) and m.is_file()]
    failed = [_failure(m) for m in ended if not _forgot_deleted(m, out)]
    for failure in failed:
        print(
            f"error: the background MLflow log of {failure.run_dir} did not finish: "
            f"{failure.reason} (its output: {failure.log}). The run directory holds the "
            f"whole run; log it with: ragsweep-log {failure.run_dir}",
            file=out,
        )
    return failed


def _forgot_deleted(marker: Path, out: TextIO) -> bool:
    """True (and the marker removed, once said) when the failed log's run directory no
    longer holds its ``record.json``: nothing is left to log, and ``ragsweep-log`` could
    not clear it."""
    run_dir = Path(_run_dir(marker))
    if (run_dir / RECORD_FILE).is_file():
        return False
    print(
        f"warning: the background MLflow log of {run_dir} did not finish, and the run "
        f"directory (its {RECORD_FILE}) is gone; nothing is left to log, forgotten",
        file=out,
    )
    remove(marker)
    return True


def _markers(folder: Path) -> Iterator[Path]:
    return iter(sorted(folder.glob(f"*{MARKER_SUFFIX}")))


def _running(marker: Path) -> bool:
    """True while a logger holds ``marker`` (False once it is gone)."""
    return locks.is_held(marker) is True


def _content(marker: Path) -> dict[str, Any]:
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _run_dir(marker: Path) -> str:
    return str(_content(marker).get("run_dir", marker.stem))


def _failure(marker: Path) -> Failed:
    data = _content(marker)
    note = marker.with_suffix(FAILED_SUFFIX)
    try:
        reason = note.read_text(encoding="utf-8").strip()
    except OSError:
        reason = "its process ended before it logged the run (killed, or the machine stopped)"
    return Failed(str(data.get("run_dir", marker.stem)), reason, str(data.get("log", "")))
