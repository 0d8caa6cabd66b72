"""Background logging: a single run hands its MLflow logging to a detached process.

Importing MLflow and opening its SQLite store take a few seconds, longer than a warm demo
run itself. With ``tracking.background`` on (``auto``: when the run's standard output is a
terminal), a single run (not ``-m``) on an existing local SQLite store writes
``record.json`` as always, starts ``ragsweep-log`` on its run directory in a session of its
own (output in ``ragsweep-log.txt`` there), and exits without importing MLflow.

Every background log leaves a *pending marker* beside the store
(``mlflow.db.pending/<record id>.json``) for as long as it runs: the run takes an exclusive
``flock`` on the marker before it starts the logger, and the logger inherits that lock, so
the marker is locked exactly while a logger is alive. A logger that succeeds removes its
marker; one that fails writes ``<record id>.failed`` (the reason) beside it and leaves both.
Every reader of the store (``ragsweep-compare``, ``-promote``, ``-gate``, a sweep's
resume, ``ragsweep ui``, ``ragsweep-log``) calls :func:`wait_for_pending` when it first
opens the store: it waits for the locked markers, saying so, and reports every failed or
interrupted background log with the ``ragsweep-log RUN_DIR`` command that logs it (which
removes the marker). See docs/tracking.md, "Background logging".
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ragsweep.config.schema import TrackingConfig
from ragsweep.core.names import RECORD_FILE
from ragsweep.tracking.store import (
    LOCK_WAIT_SECONDS,
    POLL_SECONDS,
    TrackingStoreError,
    read_sqlite_state,
    sqlite_path,
    tracking_uri,
)

LOG_FILE = "ragsweep-log.txt"
"""In a run directory: what its background ``ragsweep-log`` printed (not uploaded)."""
MARKER_SUFFIX = ".json"
FAILED_SUFFIX = ".failed"
RUN_EXIT_SECONDS = 5.0
"""At most this long the background logger waits for its run's process to end before it
logs anyway (a program that calls ragsweep and goes on running)."""
PROGRESS_SECONDS = 5.0
"""How often a reader waiting for background logs says that it still waits."""


OUTLIVED_BY_NOTHING_ENV = ("SLURM_JOB_ID",)
"""Environment variables of schedulers that end every process of a job step when its
command exits (``srun --pty``): a detached logger there would die with the run."""


def _at_terminal() -> bool:
    """At a terminal, and the logger can outlive the run: not when this process or its
    parent is PID 1 (``docker run -t IMAGE ragsweep``: the container ends with it) or runs
    inside a scheduler's job (:data:`OUTLIVED_BY_NOTHING_ENV`)."""
    if 1 in (os.getpid(), os.getppid()) or any(v in os.environ for v in OUTLIVED_BY_NOTHING_ENV):
        return False
    return sys.stdout.isatty()


BACKGROUND_RULES: dict[str, Callable[[], bool]] = {
    "auto": _at_terminal,
    "always": lambda: True,
    "never": lambda: False,
}
"""``tracking.background`` → whether a single run may log in the background. ``auto``
keeps scripts and pipes synchronous: a script that runs ``ragsweep`` and then reads the
store with MLflow's own client finds the run there."""


NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "gpfs"}
    | {"fuse.sshfs", "fuse.glusterfs", "fuse.ceph", "beegfs"}
)
"""File-system types (``/proc/self/mountinfo``) on which Linux emulates ``flock`` with
per-process locks that a child does not inherit; a store on one logs in the run's own
process."""
MOUNTINFO = Path("/proc/self/mountinfo")


def filesystem_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The type of the file system holding ``path`` (the mount with the longest mount point
    above it in ``mountinfo``, this process's ``/proc/self/mountinfo`` by default); None
    where that cannot be read (not Linux)."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text(encoding="utf-8")
        except OSError:
            return None
    target = path.resolve()
    best: tuple[int, str] | None = None
    for line in mountinfo.split("\n"):
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        point = Path(parts[4].replace("\\040", " "))
        if (target == point or point in target.parents) and (
            best is None or len(point.parts) > best[0]
        ):
            best = (len(point.parts), rest.split()[0])
    return None if best is None else best[1]


def pending_dir(uri: str) -> Path | None:
    """Where the pending markers of store ``uri`` live (a SQLite store only):
    ``<db>.pending/`` beside the database file."""
    path = sqlite_path(uri)
    return None if path is None else path.with_name(f"{path.name}.pending")


def store_is_ready(uri: str) -> bool:
    """True when ``uri`` is a local SQLite file that exists with a complete schema (read
    with ``sqlite3``, without MLflow): the only store a run hands to a background logger,
    so a store to create, repair or reach over the network is still checked before any
    work, in the run's own process."""
    path = sqlite_path(uri)
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return False
    if filesystem_type(path) in NETWORK_FILESYSTEMS:
        return False  # flock there is per process, not inherited: markers would not hold
    try:
        state = read_sqlite_state(path)
    except Exception:  # unreadable: the in-process check reports it properly
        return False
    return state.version is not None and not state.problems() and "experiments" in state.tables


def wants_background(cfg: TrackingConfig, multirun: bool) -> bool:
    """Whether a run with ``cfg`` logs in the background (module docstring): a single run,
    ``tracking.background`` allows it, and the store is an existing SQLite file."""
    if multirun or not cfg.enabled or not BACKGROUND_RULES[cfg.background]():
        return False
    return store_is_ready(tracking_uri(cfg))


@dataclass(frozen=True)
class BackgroundLog:
    """A started background log: its run directory, output file and marker."""

    run_dir: Path
    log_file: Path
    marker: Path
    uri: str

    def describe(self) -> str:
        """What the user is told: where the run will appear and how to wait for it."""
        return (
            f"MLflow: the run is being logged to {self.uri} in the background (its output: "
            f"{self.log_file}); `ragsweep-log --wait {self.run_dir}` waits until it is "
            "there, and ragsweep-compare, -promote, -gate and `ragsweep ui` wait for it too"
        )


_LOGGER = (
    sys.executable,
    *(("-P",) if sys.version_info >= (3, 11) else ()),  # the run's folder is not on its path
    "-m",
    "ragsweep.cli.log",
)
"""The background logger's command (``ragsweep-log`` of this interpreter)."""
_STARTED: list[tuple[subprocess.Popen[bytes], int]] = []
"""The background loggers this process started, each with the write end of the pipe it
waits on (:func:`wait_for_run_exit`; closed by the kernel when this process ends, or once
the logger has exited, so a long-lived caller keeps neither zombies nor descriptors)."""


def _reap_ended() -> None:
    for started in list(_STARTED):
        process, held_open = started
        if process.poll() is not None:
            os.close(held_open)
            _STARTED.remove(started)


def start(uri: str, record_id: str, run_dir: Path) -> BackgroundLog:
    """Start ``ragsweep-log`` on ``run_dir`` (its ``record.json`` written) in its own
    session, holding the locked pending marker of ``record_id``; return at once."""
    folder = pending_dir(uri)
    assert folder is not None, "only SQLite stores are logged in the background"
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / f"{record_id}{MARKER_SUFFIX}"
    log_file = run_dir / LOG_FILE
    written = folder / f".{record_id}.tmp"  # locked and filled before readers can see it
    _reap_ended()
    until_exit, held_open = os.pipe()  # the logger reads EOF once this process has ended
    try:
        with written.open("w", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # inherited by the logger, held until it exits
            content = {"run_dir": str(run_dir.resolve()), "log": str(log_file.resolve())}
            json.dump(content, handle)
            handle.flush()
            written.replace(marker)  # the lock belongs to the file, not to its name
            with log_file.open("w", encoding="utf-8") as output:
                process = subprocess.Popen(
                    [
                        *_LOGGER,
                        f"--background={marker}",
                        f"--after={until_exit}",
                        f"--lock-fd={handle.fileno()}",
                        str(run_dir),
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    pass_fds=(handle.fileno(), until_exit),
                    start_new_session=True,  # not killed with the terminal's process group
                )
    except OSError as exc:  # a full disk, a folder that went away, no process to start
        written.unlink(missing_ok=True)
        marker.unlink(missing_ok=True)
        os.close(held_open)
        raise TrackingStoreError(
            f"cannot start the background MLflow log of {run_dir}: {exc}; the run "
            f"directory holds the whole run, log it with: ragsweep-log {run_dir}"
        ) from None
    finally:
        os.close(until_exit)
    _STARTED.append((process, held_open))
    return BackgroundLog(run_dir, log_file, marker, uri)


def wait_for_run_exit(fd: int, wait_seconds: float = RUN_EXIT_SECONDS) -> None:
    """In the background logger: wait until the run that started it has exited (the pipe
    ``fd`` reaches its end), at most ``wait_seconds``, so that importing MLflow does not
    slow the end of the user's process; then close ``fd``."""
    try:
        select.select([fd], [], [], wait_seconds)
    finally:
        os.close(fd)


def finish(marker: Path, error: str | None) -> None:
    """Called by the background logger at its end: remove the marker, or record ``error``
    beside it (the marker stays, so readers report it)."""
    if error is None:
        marker.unlink(missing_ok=True)
        return
    marker.with_suffix(FAILED_SUFFIX).write_text(error + "\n", encoding="utf-8")


def forget(uri: str, record_id: str) -> None:
    """Remove what a background log of ``record_id`` left (``ragsweep-log`` logged the
    record itself): its marker and failure note, unless a logger still holds it."""
    folder = pending_dir(uri)
    if folder is None:
        return
    marker = folder / f"{record_id}{MARKER_SUFFIX}"
    if marker.is_file() and _locked(marker):
        return
    marker.unlink(missing_ok=True)
    marker.with_suffix(FAILED_SUFFIX).unlink(missing_ok=True)


@dataclass(frozen=True)
class Failed:
    """A background log that ended without logging its run."""

    run_dir: str
    reason: str
    log: str


_WAITED: set[str] = set()
"""Stores this process has waited for (once per process: later logs are its own)."""


def skip_waiting(uri: str) -> None:
    """Never wait in this process for ``uri``'s pending logs (a background logger: two of
    them waiting for each other would wait forever)."""
    _WAITED.add(uri)


def wait_for_pending(
    uri: str, stream: TextIO | None = None, wait_seconds: float = LOCK_WAIT_SECONDS
) -> list[Failed]:
    """Wait until no background log to ``uri`` is running (the first time this process
    asks), saying so on ``stream`` (stderr); report each failed one there and return them."""
    if uri in _WAITED:
        return []
    _WAITED.add(uri)
    folder = pending_dir(uri)
    if folder is None or not folder.is_dir():
        return []
    out = stream or sys.stderr
    _wait_running(folder, out, wait_seconds)
    return report_failed(uri, out)


def report_failed(uri: str, stream: TextIO | None = None) -> list[Failed]:
    """Report on ``stream`` (stderr) every background log to ``uri`` that ended without
    logging its run (those still running are not waited for); return them."""
    folder = pending_dir(uri)
    if folder is None or not folder.is_dir():
        return []
    out = stream or sys.stderr
    # a marker gone once found unlocked was removed by a logger that succeeded meanwhile
    ended = [m for m in _markers(folder) if not _locked(m) and m.is_file()]
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
    marker.with_suffix(FAILED_SUFFIX).unlink(missing_ok=True)
    marker.unlink(missing_ok=True)
    return True


def _markers(folder: Path) -> Iterator[Path]:
    return iter(sorted(folder.glob(f"*{MARKER_SUFFIX}")))


def _wait_running(folder: Path, out: TextIO, wait_seconds: float) -> None:
    started = time.monotonic()
    said = -PROGRESS_SECONDS
    while True:
        running = [m for m in _markers(folder) if _locked(m)]
        if not running:
            return
        waited = time.monotonic() - started
        if waited >= wait_seconds:
            raise TrackingStoreError(
                f"waited {wait_seconds:.0f} s for {len(running)} background MLflow log(s) "
                f"to {folder.parent} ({', '.join(_run_dir(m) for m in running)}); they are "
                "still running"
            )
        if waited - said >= PROGRESS_SECONDS:
            print(
                f"waiting for {len(running)} background MLflow log(s) to finish "
                f"({', '.join(_run_dir(m) for m in running)})",
                file=out,
                flush=True,
            )
            said = waited
        time.sleep(POLL_SECONDS)


def _locked(marker: Path) -> bool:
    """True while a background logger holds ``marker`` (False once it is gone)."""
    try:
        handle = marker.open("r")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


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
