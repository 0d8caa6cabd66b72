"""The sweep's logger: one long-lived process logs the MLflow runs of the jobs a sweep runs
in its own process, while the next job computes.

Logging a run to MLflow's SQLite store costs about 0.12 s of CPU (the store's transactions,
the artifact copies), and a thread would not take it off the sweep's path: that work holds
the GIL. So ``ragsweep -m`` with Hydra's basic launcher (every job in the sweep's process)
starts ``ragsweep-log --serve`` once, beside the sweep. Each job writes its
``record.json`` as always and hands its run directory over (:meth:`SweepLogger.submit`);
the logger logs the records in order, exactly as a run logs itself, and answers with each
run id or error. Before the sweep reads its children from the store (after each batch of a
one-axis sweep, at its end) it waits for the logger (:meth:`SweepLogger.drain`), so what it
reads is complete; a grid waits at its end. When the sweep ends, however it ends, the
logger is told there is nothing more; it logs what it was given and exits. It ignores
Ctrl-C (the terminal sends it to the whole process group), so runs already evaluated are
still logged when the sweep is interrupted.

A logger that dies is replaced by logging in the sweep's process: the records it had not
answered, and every later one, are logged there (a run it left half-logged is closed, one
it logged completely is kept). A record that could not be logged is reported with the
``ragsweep-log RUN_DIR`` command that logs it (its run directory holds the whole run), and
the sweep, having run every job, exits with status 2. Launchers that run jobs in other
processes (joblib, Ray, submitit) log in those processes, as before; so does every job
with ``tracking.background=never``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn

from ragsweep.config.schema import TrackingConfig, from_mapping
from ragsweep.tracking.background import skip_waiting
from ragsweep.tracking.store import reason, tracking_uri

IN_PROCESS_LAUNCHERS = frozenset({"hydra._internal.core_plugins.basic_launcher.BasicLauncher"})
"""Hydra launchers (``hydra.launcher._target_``) that run every job in the sweep's own
process: only their jobs can hand their runs to the sweep's logger."""
LOGGER_OUTPUT = "sweep-logger.txt"
"""In the sweep directory: what the sweep's logger printed (one line per run)."""
KEY = "key"
RUN_DIR = "run_dir"
TAGS = "tags"
WARM_UP = "warm_up"
END = "end"
"""A sweep's requests to its logger, one JSON object per line: ``{"warm_up": tracking
settings}`` first, then ``{"key": K, "run_dir": path}`` per run to log and ``{"key": K,
"tags": {"run_id": id, "tags": {name: value}}}`` per run whose tags to set, and
``{"end": true}`` last (the end of its input too: a process forked from the sweep may hold
the pipe open). Each answer is ``{"key": K, "run_id": id, "error": reason or null}``."""
PROGRESS_SECONDS = 5.0
"""How often a sweep waiting for its logger says that it still waits."""
_COMMAND = (
    sys.executable,
    *(("-P",) if sys.version_info >= (3, 11) else ()),  # the sweep's folder is not on its path
    "-m",
    "ragsweep.cli.log",
)


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


class SweepLogger:
    """A running ``ragsweep-log --serve`` process and the requests handed to it.

    A thread reads the logger's answers as they come, so the logger never waits on a full
    pipe while the sweep computes; :meth:`drain` waits for the answers to every request so
    far. ``tracking``: the sweep's store settings (tags are set there).
    """

    def __init__(
        self,
        process: subprocess.Popen[str],
        answers: IO[str],
        output: Path,
        tracking: TrackingConfig,
    ) -> None:
        self.process = process
        self.output = output
        self.tracking = tracking
        self.pid = os.getpid()
        self._done = threading.Condition()
        self._pending: list[dict[str, Any]] = []
        self._answers: dict[str, Logged] = {}
        self._ended = False
        self._sent = 0
        self.failed: list[Logged] = []
        """Every request that failed so far (reported as it was drained)."""
        self._reader = threading.Thread(target=self._read, args=(answers,), daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, output: Path, tracking: TrackingConfig) -> SweepLogger:
        """Start the logger process, its output in ``output``, and have it open
        ``tracking``'s store (:func:`ragsweep.tracking.log.warm_up`); return at once. The
        settings go through its standard input: a URI may hold a password."""
        output.parent.mkdir(parents=True, exist_ok=True)
        answers, answer_end = os.pipe()
        try:
            with output.open("a", encoding="utf-8") as printed:  # a resumed sweep adds to it
                process = subprocess.Popen(
                    [*_COMMAND, f"--serve={answer_end}"],
                    stdin=subprocess.PIPE,
                    stdout=printed,
                    stderr=subprocess.STDOUT,
                    pass_fds=(answer_end,),
                    text=True,
                )
        except OSError:
            os.close(answers)
            raise
        finally:
            os.close(answer_end)
        logger = cls(process, os.fdopen(answers, "r", encoding="utf-8"), output, tracking)
        logger._send({WARM_UP: dataclasses.asdict(tracking)})
        return logger

    # -- the sweep's side ------------------------------------------------------------------

    def submit(self, run_dir: Path) -> None:
        """Hand over ``run_dir`` (its ``record.json`` written) to be logged; return at once.
        With the logger gone, it is logged here at the next :meth:`drain`."""
        self._request({RUN_DIR: str(run_dir.resolve())})

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        """Have ``tags`` set on run ``run_id`` of the sweep's store; return at once."""
        self._request({TAGS: {"run_id": run_id, "tags": tags}})

    def drain(self, stream: IO[str] | None = None) -> list[Logged]:
        """Wait until every request so far is done, saying so on ``stream`` (stderr) every
        few seconds; those the logger did not answer (it died) are done in this process.
        Returns what became of each, in the order they were made, and forgets them."""
        out = stream or sys.stderr
        said = time.monotonic()
        with self._done:
            while not self._ended and self._waiting():
                self._done.wait(timeout=1.0)
                if time.monotonic() - said >= PROGRESS_SECONDS:
                    print(
                        f"waiting for the sweep's MLflow logger: {self._waiting()} run(s) "
                        f"still being logged (its output: {self.output})",
                        file=out,
                        flush=True,
                    )
                    said = time.monotonic()
            pending, self._pending = self._pending, []
            answers = [self._answers.pop(r[KEY], None) for r in pending]
        outcome = [
            a if a is not None else _done_here(r, self.tracking)
            for r, a in zip(pending, answers, strict=True)
        ]
        self.failed.extend(o for o in outcome if o.error is not None)
        return outcome

    def close(self, stream: IO[str] | None = None) -> list[Logged]:
        """Tell the logger there is nothing more, wait for its last answers and for it to
        exit; return what became of the requests not drained yet."""
        self._send({END: True})
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:  # already gone
            pass
        outcome = self.drain(stream)
        self.process.wait()
        self._reader.join()
        return outcome

    def _request(self, request: dict[str, Any]) -> None:
        with self._done:
            self._sent += 1
            request = {KEY: str(self._sent), **request}
            self._pending.append(request)
            alive = not self._ended
        if not (alive and self._send(request)):
            self._reader.join()  # its answers end too: drain knows what it did not answer

    def _send(self, request: dict[str, Any]) -> bool:
        """Write one request line to the logger; False when it is gone."""
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except (OSError, ValueError):  # the logger died: its answers end too
            return False
        return True

    def _waiting(self) -> int:
        return sum(r[KEY] not in self._answers for r in self._pending)

    # -- the reader thread -----------------------------------------------------------------

    def _read(self, answers: IO[str]) -> None:
        with answers:
            for line in answers:
                answer = _answer(line)
                if answer is None:
                    continue
                with self._done:
                    self._answers[answer[0]] = answer[1]
                    self._done.notify_all()
        with self._done:
            self._ended = True
            self._done.notify_all()


def _answer(line: str) -> tuple[str, Logged] | None:
    try:
        data = json.loads(line)
        run_dir = data.get(RUN_DIR)
        logged = Logged(Path(run_dir) if run_dir else None, data["run_id"], data["error"])
        return str(data[KEY]), logged
    except (ValueError, KeyError, TypeError):
        return None  # not an answer: the logger's answers are one JSON object per line


def _done_here(request: dict[str, Any], tracking: TrackingConfig) -> Logged:
    """Do ``request`` in this process: the logger died before it answered, perhaps while
    it was logging the run (:func:`ragsweep.tracking.log.log_run_once`)."""
    if RUN_DIR in request:
        return log_record(Path(request[RUN_DIR]), once=True)
    return tags_set(tracking, request[TAGS])


def log_record(run_dir: Path, once: bool = False) -> Logged:
    """Log the run directory ``run_dir`` (its ``record.json``) to the store it names;
    ``once``: mend what an interrupted log of the same record left instead of adding a
    second run (:func:`ragsweep.tracking.log.log_run_once`). Every failure is returned, with
    its first line as the reason."""
    from ragsweep.tracking.log import load_record, log_run, log_run_once

    try:
        tracking, record = load_record(run_dir)
        skip_waiting(tracking_uri(tracking))  # the sweep waited for them before it started
        logged = log_run_once if once else log_run
        return Logged(run_dir, logged(tracking, record, saved=True))
    except Exception as exc:  # reported with the command that logs it later
        return Logged(run_dir, error=reason(exc.__cause__ or exc))


def tags_set(tracking: TrackingConfig, request: dict[str, Any]) -> Logged:
    """Set the tags of a :data:`TAGS` request (``run_id``, ``tags``) in ``tracking``'s
    store; every failure is returned."""
    from mlflow.entities import RunTag

    from ragsweep.tracking.log import client_for

    run_id = str(request["run_id"])
    try:
        tags = [RunTag(str(k), str(v)) for k, v in request["tags"].items()]
        client_for(tracking).log_batch(run_id, tags=tags)
    except Exception as exc:
        return Logged(None, run_id, reason(exc))
    return Logged(None, run_id)


# -- the sweep's logger, for its jobs ------------------------------------------------------

_ACTIVE: list[SweepLogger] = []
"""The logger of the sweep running in this process, while it runs."""


def active() -> SweepLogger | None:
    """The logger a job in this process hands its run to, if its sweep started one (never
    in a process forked from the sweep's: the logger's pipes belong to the sweep)."""
    logger = _ACTIVE[-1] if _ACTIVE else None
    return logger if logger is not None and logger.pid == os.getpid() else None


def drain_active(stream: IO[str] | None = None) -> list[Logged]:
    """Wait for the active logger (if any), report on ``stream`` (stderr) each run it could
    not log, and return what became of every run handed over since the last drain."""
    logger = active()
    if logger is None:
        return []
    return _reported(logger.drain(stream), stream)


def wants_logger(tracking: TrackingConfig, launcher_target: str) -> bool:
    """Whether a sweep with ``tracking`` and Hydra launcher ``launcher_target`` starts a
    logger: tracking is on, ``tracking.background`` is not ``never``, and its jobs run in
    its own process."""
    return (
        tracking.enabled
        and tracking.background != "never"
        and launcher_target in IN_PROCESS_LAUNCHERS
    )


@contextmanager
def logging_jobs(
    tracking: TrackingConfig, hydra_cfg: Any, stream: IO[str] | None = None
) -> Iterator[SweepLogger | None]:
    """While the sweep of ``hydra_cfg`` (the ``hydra`` node of its config) runs, its jobs
    hand their runs to one logger (when :func:`wants_logger`); at the end every run is
    logged (or reported on ``stream``) before this returns."""
    if not wants_logger(tracking, str(hydra_cfg.launcher.get("_target_", ""))):
        yield None
        return
    logger = SweepLogger.start(Path(str(hydra_cfg.sweep.dir)) / LOGGER_OUTPUT, tracking)
    _ACTIVE.append(logger)
    try:
        yield logger
    finally:
        _ACTIVE.remove(logger)
        _reported(logger.close(stream), stream)
    runs_failed = [o for o in logger.failed if o.run_dir is not None]
    if runs_failed:  # every job ran; what they found is on disk, not all of it in MLflow
        print(
            f"error: {len(runs_failed)} run(s) of this sweep were not logged to MLflow "
            "(above); their run directories hold them, log them with ragsweep-log",
            file=stream or sys.stderr,
            flush=True,
        )
        sys.exit(2)


def _reported(outcome: list[Logged], stream: IO[str] | None) -> list[Logged]:
    for logged in outcome:
        if logged.error is not None:
            print(logged.describe(), file=stream or sys.stderr, flush=True)
    return outcome


# -- the logger process --------------------------------------------------------------------


def serve(requests: IO[str], answer_fd: int) -> NoReturn:
    """The logger process (``ragsweep-log --serve=FD``): warm up, then do each request read
    from ``requests`` (:data:`WARM_UP`) and answer on ``answer_fd``, until ``requests``
    ends; then exit (status 0)."""
    from ragsweep.tracking.log import warm_up

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the sweep's Ctrl-C: finish what was given
    os.set_inheritable(answer_fd, False)  # nothing MLflow starts holds the sweep's answers
    answers: IO[str] | None = os.fdopen(answer_fd, "w", encoding="utf-8")
    tracking = TrackingConfig()
    for line in requests:
        request = json.loads(line) if line.strip() else {}
        if END in request:
            break
        if WARM_UP in request:
            tracking = from_mapping(TrackingConfig, request[WARM_UP], "tracking")
            warm_up(tracking)
        if KEY not in request:
            continue
        if RUN_DIR in request:
            logged = log_record(Path(request[RUN_DIR]))
        else:
            logged = tags_set(tracking, request[TAGS])
        if logged.error:
            print(logged.describe(), flush=True)
        elif logged.run_dir is not None:
            print(f"{logged.run_dir}: logged as run {logged.run_id}", flush=True)
        answers = _answered(answers, request[KEY], logged)
    if answers is not None:
        answers.close()
    sys.stdout.flush()
    os._exit(0)  # every run is committed and answered: skip tearing down MLflow's modules


def _answered(answers: IO[str] | None, key: str, logged: Logged) -> IO[str] | None:
    """Send ``logged`` to the sweep as the answer to request ``key``; None from then on
    when the sweep is gone (the logger still does what it was given)."""
    if answers is None:
        return None
    run_dir = None if logged.run_dir is None else str(logged.run_dir)
    answer = {KEY: key, RUN_DIR: run_dir, "run_id": logged.run_id, "error": logged.error}
    try:
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    except (BrokenPipeError, ValueError):
        return None
    return answers
