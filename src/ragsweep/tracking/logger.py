"""The background logger process: ``ragsweep-log --serve`` logs the runs it is handed.

One program serves both users of background logging (:mod:`ragsweep.tracking.background`
starts it): a single run hands it one run directory and exits, a sweep hands it a stream of
run directories while its next jobs compute. It reads requests from its standard input, one
JSON object a line (:data:`REQUESTS`), does them in order, exactly as a run logs itself
(:func:`log_record`), prints one line per run, and answers each request on the pipe given
with ``--answers`` when there is one (a sweep's). It ignores Ctrl-C (the terminal sends it to
a sweep's whole process group), so what it was given is still logged.

A request that names a pending marker (:mod:`ragsweep.tracking.pending`) is a single run's:
the logger holds that marker's lock (``--lock-fd``) while it lives and removes the marker
once the run is logged, or records why not beside it. A single run's logger also waits for
the run's process to end first (``--after``, at most :data:`RUN_EXIT_SECONDS`), at low
priority, so importing MLflow does not slow the user's next command.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ragsweep.config.schema import TrackingConfig, from_mapping
from ragsweep.tracking import pending
from ragsweep.tracking.log import client_for, load_record, log_run, log_run_once, warm_up
from ragsweep.tracking.store import reason, skip_waiting, tracking_uri

KEY = "key"
RUN_DIR = "run_dir"
MARKER = "marker"
TAGS = "tags"
WARM_UP = "warm_up"
END = "end"
REQUESTS = (KEY, RUN_DIR, MARKER, TAGS, WARM_UP, END)
"""The requests to a logger, one JSON object per line: ``{"warm_up": tracking settings}``
(open that store while the first job computes), ``{"key": K, "run_dir": path}`` per run to
log (with ``"marker": path``: a single run's, :func:`log_marked`) and ``{"key": K, "tags":
{"run_id": id, "tags": {name: value}}}`` per run whose tags to set, and ``{"end": true}``
last (the end of its input too: a process forked from a sweep may hold the pipe open). Each
answer is ``{"key": K, "run_dir": path or null, "run_id": id, "error": reason or null}``."""
RUN_EXIT_SECONDS = 5.0
"""At most this long a single run's logger waits for the run's process to end before it
logs anyway (a program that calls ragsweep and goes on running)."""
BACKGROUND_NICENESS = 10
COMMAND = (
    sys.executable,
    *(("-P",) if sys.version_info >= (3, 11) else ()),  # the caller's folder is not on its path
    "-m",
    "ragsweep.cli.log",
)
"""``ragsweep-log`` of this interpreter: ``--serve`` is a command's logger, ``--resident``
the resident one (:mod:`ragsweep.tracking.resident`)."""
LOGGING = threading.Lock()
"""Held while a request is done: the resident logger's sessions run in threads, and MLflow's
store (one SQLite file) takes one writer at a time."""
EXIT_ERROR = 2
"""The logger's exit status when a single run's log failed (its marker says why)."""


@dataclass(frozen=True)
class Logged:
    """What became of one request: the run of ``run_dir`` logged as ``run_id``, or (no
    ``run_dir``) the tags of run ``run_id`` set; ``error``: why not (a run directory holds
    the whole run)."""

    run_dir: Path | None
    run_id: str | None = None
    error: str | None = None

    def describe(self) -> str:
        """The line a user reads about a request that failed."""
        if self.run_dir is None:
            return (
                f"error: the sweep could not update the description of run {self.run_id} "
                f"in MLflow: {self.error}"
            )
        return (
            f"error: run directory {self.run_dir} was not logged to MLflow: {self.error}. "
            f"It holds the whole run; log it with: ragsweep-log {self.run_dir}"
        )

    def line(self) -> str | None:
        """What a logger prints about this request: None for tags set."""
        if self.error is not None:
            return self.describe()
        if self.run_dir is None:
            return None
        return f"{self.run_dir}: logged as run {self.run_id}"


def _log(run_dir: Path, once: bool) -> str:
    """Log ``run_dir``'s ``record.json`` to the store it names without waiting for that
    store's pending logs (two loggers waiting for each other would wait forever)."""
    tracking, record = load_record(run_dir)
    skip_waiting(tracking_uri(tracking))
    return (log_run_once if once else log_run)(tracking, record, saved=True)


def log_record(run_dir: Path, once: bool = False) -> Logged:
    """Log the run directory ``run_dir`` (its ``record.json``) to the store it names;
    ``once``: mend what an interrupted log of the same record left instead of adding a
    second run (:func:`ragsweep.tracking.log.log_run_once`). Every failure is returned, with
    its first line as the reason."""
    try:
        return Logged(run_dir, _log(run_dir, once))
    except Exception as exc:  # reported with the command that logs it later
        return Logged(run_dir, error=reason(exc.__cause__ or exc))


def log_marked(run_dir: Path, marker: Path) -> Logged:
    """Log a single run's ``run_dir``, then remove its pending ``marker`` or record why it
    failed beside it (:func:`ragsweep.tracking.pending.finish`); say which on stdout."""
    try:
        run_id = _log(run_dir, once=False)
    except Exception as exc:  # every failure is recorded for the next reader
        print(f"error: {run_dir}: {exc}", flush=True)
        pending.finish(marker, reason(exc))
        return Logged(run_dir, error=reason(exc))
    print(f"{run_dir}: logged as run {run_id}", flush=True)
    pending.finish(marker, None)
    return Logged(run_dir, run_id)


def tags_set(tracking: TrackingConfig, request: dict[str, Any]) -> Logged:
    """Set the tags of a :data:`TAGS` request (``run_id``, ``tags``) in ``tracking``'s
    store; every failure is returned."""
    from mlflow.entities import RunTag

    run_id = str(request["run_id"])
    try:
        tags = [RunTag(str(k), str(v)) for k, v in request["tags"].items()]
        client_for(tracking).log_batch(run_id, tags=tags)
    except Exception as exc:
        return Logged(None, run_id, reason(exc))
    return Logged(None, run_id)


def wait_for_run_exit(fd: int, wait_seconds: float = RUN_EXIT_SECONDS) -> None:
    """Wait until the run that started this logger has exited (the pipe ``fd`` reaches its
    end), at most ``wait_seconds``; then close ``fd``."""
    try:
        select.select([fd], [], [], wait_seconds)
    finally:
        os.close(fd)


def serve(
    requests: IO[str],
    answer_fd: int | None = None,
    after: int | None = None,
    lock_fd: int | None = None,
) -> int:
    """The logger process (module docstring): do each request read from ``requests`` until
    it ends, answering on ``answer_fd`` when given; ``after``: the pipe to wait on first
    (:func:`wait_for_run_exit`); ``lock_fd``: a marker's lock, passed on to no process this
    one starts. Returns the exit status (:data:`EXIT_ERROR` when a single run's log failed)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the sweep's Ctrl-C: finish what was given
    for fd in (answer_fd, lock_fd):  # nothing MLflow starts holds them
        if fd is not None:
            os.set_inheritable(fd, False)
    if after is not None:
        os.nice(BACKGROUND_NICENESS)  # the user's next command comes first
        wait_for_run_exit(after)
    answers = None if answer_fd is None else os.fdopen(answer_fd, "w", encoding="utf-8")
    status = serve_session(requests, answers)
    sys.stdout.flush()
    return status


def serve_session(requests: IO[str], answers: IO[str] | None) -> int:
    """Do each request read from ``requests`` until it ends, answering on ``answers`` when
    given, one request at a time in this process (:data:`LOGGING`): the loop of a command's
    logger (:func:`serve`), and of each session of the resident one. Returns the exit
    status (:data:`EXIT_ERROR` when a single run's log failed)."""
    tracking = TrackingConfig()
    status = 0
    for line in requests:
        request = json.loads(line) if line.strip() else {}
        if END in request:
            break
        if WARM_UP in request:
            tracking = from_mapping(TrackingConfig, request[WARM_UP], "tracking")
            with LOGGING:
                warm_up(tracking)
        if KEY not in request:
            continue
        with LOGGING:
            logged = _served(request, tracking)
        if MARKER in request and logged.error is not None:
            status = EXIT_ERROR
        answers = _answered(answers, request[KEY], logged)
    if answers is not None:
        answers.close()
    return status


def _served(request: dict[str, Any], tracking: TrackingConfig) -> Logged:
    """Do one request, saying on stdout what became of it."""
    if MARKER in request:
        return log_marked(Path(request[RUN_DIR]), Path(request[MARKER]))
    if RUN_DIR in request:
        logged = log_record(Path(request[RUN_DIR]))
    else:
        logged = tags_set(tracking, request[TAGS])
    if logged.line() is not None:
        print(logged.line(), flush=True)
    return logged


def _answered(answers: IO[str] | None, key: str, logged: Logged) -> IO[str] | None:
    """Send ``logged`` as the answer to request ``key``; None from then on when no one
    listens (the logger still does what it was given)."""
    if answers is None:
        return None
    run_dir = None if logged.run_dir is None else str(logged.run_dir)
    answer = {KEY: key, RUN_DIR: run_dir, "run_id": logged.run_id, "error": logged.error}
    try:
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    except (OSError, ValueError):  # a pipe or a socket whose reader is gone
        return None
    return answers


def parse_answer(line: str) -> tuple[str, Logged] | None:
    """The request key and outcome of one answer line; None for a line that is not one."""
    try:
        data = json.loads(line)
        run_dir = data.get(RUN_DIR)
        logged = Logged(Path(run_dir) if run_dir else None, data["run_id"], data["error"])
        return str(data[KEY]), logged
    except (ValueError, KeyError, TypeError):
        return None  # not an answer: the logger's answers are one JSON object per line
