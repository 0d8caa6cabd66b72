"""Background logging: a run hands its MLflow logging to a logger process, and goes on.

Importing MLflow and opening its SQLite store take a few seconds, longer than a warm demo
run itself, and logging one run costs about 0.12 s of CPU that a thread would not take off
a sweep's path (that work holds the GIL). So the logging is done by one program,
``ragsweep-log --serve`` (:mod:`ragsweep.tracking.logger`), started here in one way
(:func:`spawn`), for two users:

- **A single run** (:func:`start`, :func:`log_run_in_background`): with
  ``tracking.background`` on (``auto``: when the run's standard output is a terminal), a
  single run (not ``-m``) on an existing local SQLite store writes ``record.json`` as always,
  starts the logger on its run directory in a session of its own (output in
  ``ragsweep-log.txt`` there), and exits without importing MLflow. The logger holds the
  run's locked pending marker beside the store while it lives
  (:mod:`ragsweep.tracking.pending`); every reader of the store waits for it when it first
  opens the store (:func:`ragsweep.tracking.store.wait_for_pending`).
- **A sweep** (:func:`logging_jobs`, :class:`SweepLogger`): ``ragsweep -m`` with Hydra's
  basic launcher (every job in the sweep's process) starts the logger once, beside the
  sweep. Each job writes its ``record.json`` and hands its run directory over
  (:meth:`SweepLogger.submit`); the logger answers with each run id or error. Before the
  sweep reads its children from the store it waits for the logger
  (:meth:`SweepLogger.drain`), so what it reads is complete. When the sweep ends, however
  it ends, the logger is told there is nothing more; it logs what it was given and exits.
  A logger that dies is replaced by logging in the sweep's process: the records it had not
  answered, and every later one (a run it left half-logged is closed, one it logged
  completely is kept). A record that could not be logged is reported with the
  ``ragsweep-log RUN_DIR`` command that logs it, and the sweep, having run every job, exits
  with status 2. Launchers that run jobs in other processes (joblib, Ray, submitit) log in
  those processes; so does every job with ``tracking.background=never``.

With ``tracking.resident`` on a ready SQLite store, the logger of a sweep or of a single run
that logs before it exits is a session with the resident logger instead
(:mod:`ragsweep.tracking.resident`, :func:`wants_resident`): the same requests and answers
over its socket (:class:`ragsweep.tracking.resident.Connection` in place of :class:`Pipes`),
falling back to a logger of the command's own, with a note in its output, when that fails.

See docs/tracking.md, "Background logging".
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ragsweep.config.schema import TrackingConfig
from ragsweep.core.errors import RagsweepError
from ragsweep.core.terminal import terminal_width, wrap
from ragsweep.tracking import pending, resident
from ragsweep.tracking.log import LOG_FILE, RunRecord, not_logged, save_record
from ragsweep.tracking.logger import (
    COMMAND,
    END,
    KEY,
    MARKER,
    RUN_DIR,
    TAGS,
    WARM_UP,
    Logged,
    log_record,
    parse_answer,
    tags_set,
)
from ragsweep.tracking.ready import experiment_is_ready, store_is_ready
from ragsweep.tracking.server import HEALTH_TIMEOUT_SECONDS
from ragsweep.tracking.store import (
    TrackingStoreError,
    pending_dir,
    report_failed,
    sqlite_path,
    tracking_uri,
)

IN_PROCESS_LAUNCHERS = frozenset({"hydra._internal.core_plugins.basic_launcher.BasicLauncher"})
"""Hydra launchers (``hydra.launcher._target_``) that run every job in the sweep's own
process: only their jobs can hand their runs to the sweep's logger."""
LOGGER_OUTPUT = "sweep-logger.txt"
"""In the sweep directory: what the sweep's logger printed (one line per run)."""
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


def wants_background(cfg: TrackingConfig, multirun: bool) -> bool:
    """Whether a run with ``cfg`` logs in the background (module docstring): a single run,
    ``tracking.background`` allows it, and the store is an existing SQLite file."""
    if multirun or not cfg.enabled or not BACKGROUND_RULES[cfg.background]():
        return False
    return store_is_ready(tracking_uri(cfg))


# -- starting a logger ---------------------------------------------------------------------


def spawn(
    output: Path, *options: str, pass_fds: tuple[int, ...], append: bool, detached: bool
) -> subprocess.Popen[str]:
    """Start the logger with ``options``, its requests on a pipe to its standard input, its
    output in ``output`` (added to it when ``append``); ``detached``: in a session of its
    own, not killed with the terminal's process group. Returns at once."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("a" if append else "w", encoding="utf-8") as printed:
        return subprocess.Popen(
            [*COMMAND, "--serve", *options],
            stdin=subprocess.PIPE,
            stdout=printed,
            stderr=subprocess.STDOUT,
            pass_fds=pass_fds,
            start_new_session=detached,
            text=True,
        )


def send(process: subprocess.Popen[str], requests: Iterable[dict[str, Any]]) -> bool:
    """Write request lines to the logger; False when it is gone."""
    try:
        assert process.stdin is not None
        for request in requests:
            process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
    except (OSError, ValueError):  # the logger died
        return False
    return True


# -- a single run --------------------------------------------------------------------------


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


_STARTED: list[tuple[subprocess.Popen[str], int]] = []
"""The single runs' loggers this process started, each with the write end of the pipe it
waits on (closed by the kernel when this process ends, or once the logger has exited, so a
long-lived caller keeps neither zombies nor descriptors)."""


def _reap_ended() -> None:
    for started in list(_STARTED):
        process, held_open = started
        if process.poll() is not None:
            os.close(held_open)
            _STARTED.remove(started)


def log_run_in_background(cfg: TrackingConfig, record: RunRecord) -> BackgroundLog:
    """Save ``record.json`` and hand the run to a detached logger (:func:`start`); return at
    once, without importing MLflow."""
    uri = tracking_uri(cfg)
    report_failed(uri)  # earlier background logs that did not land: say so at every run
    save_record(cfg, record)
    return start(uri, record.record_id, record.artifacts_dir)


def start(uri: str, record_id: str, run_dir: Path) -> BackgroundLog:
    """Start the logger on ``run_dir`` (its ``record.json`` written) in its own session,
    holding the locked pending marker of ``record_id``; return at once."""
    folder = pending_dir(uri)
    assert folder is not None, "only SQLite stores are logged in the background"
    marker = pending.marker_path(folder, record_id)
    log_file = run_dir / LOG_FILE
    request = {KEY: "1", RUN_DIR: str(run_dir), MARKER: str(marker)}
    _reap_ended()
    until_exit, held_open = os.pipe()  # the logger reads EOF once this process has ended
    try:
        with pending.create(folder, record_id, run_dir, log_file) as lock:
            lock_fd = lock.fileno()  # inherited by the logger, held until it exits
            process = spawn(
                log_file,
                f"--after={until_exit}",
                f"--lock-fd={lock_fd}",
                pass_fds=(lock_fd, until_exit),
                append=False,
                detached=True,
            )
        if not send(process, [request, {END: True}]):
            raise OSError(f"the logger (process {process.pid}) ended at once")
    except OSError as exc:  # a full disk, a folder that went away, no process to start
        marker.unlink(missing_ok=True)
        os.close(held_open)
        raise TrackingStoreError(
            f"cannot start the background MLflow log of {run_dir}: {exc}; the run "
            f"directory holds the whole run, log it with: ragsweep-log {run_dir}"
        ) from None
    finally:
        os.close(until_exit)
    _close_requests(process)
    _STARTED.append((process, held_open))
    return BackgroundLog(run_dir, log_file, marker, uri)


def _close_requests(process: subprocess.Popen[str]) -> None:
    """Close the logger's standard input: nothing more to send."""
    try:
        if process.stdin is not None:
            process.stdin.close()
    except OSError:  # already gone
        pass


# -- a single run logged before it exits -----------------------------------------------------


def early_logger(cfg: TrackingConfig, run_dir: Path) -> SweepLogger | None:
    """A single run that logs before it exits (not in the background: its output is not a
    terminal) on a store and experiment that are ready (:func:`experiment_is_ready`): the
    logger is started now, so that importing MLflow and opening the store overlap the run's
    work, and MLflow is never imported by the run's process (:func:`log_through`). None:
    the run checks the store and logs in its own process (a store or experiment to create
    or repair, another kind of store, ``tracking.background=never``). The logger's output
    (its waiting for the store's lock, repairs, a crash) goes to ``run_dir``'s ``LOG_FILE``.
    Raises TrackingStoreError, before any work, when the store is a tracking server that
    does not answer (:mod:`ragsweep.tracking.server`)."""
    if not cfg.enabled or cfg.background == "never":
        return None
    try:
        uri = tracking_uri(cfg)
    except RagsweepError:  # reported by the in-process check, as before
        return None
    if not experiment_is_ready(uri, cfg.experiment, probe_seconds(cfg)):
        return None
    report_failed(uri)  # earlier background logs that did not land, as opening the store says
    try:
        logger = SweepLogger.start(run_dir / LOG_FILE, cfg)
    except OSError:  # no process to start: the run logs itself
        return None
    logger.label = "the run's MLflow logger"
    return logger


def left_to(logger: SweepLogger | None, cfg: TrackingConfig) -> bool:
    """Whether a run handing its record to ``logger`` (a sweep's or its own) leaves opening
    the store to it: the store and experiment are ready (:func:`experiment_is_ready`), so
    nothing the run's process could refuse before its work is left but what the logger's
    own opening of the store finds. Raises TrackingStoreError, before any work, when the
    store is a tracking server that does not answer."""
    if logger is None or not cfg.enabled:
        return False
    try:
        uri = tracking_uri(cfg)
    except RagsweepError:  # reported by the in-process check, as before
        return False
    return experiment_is_ready(uri, cfg.experiment, probe_seconds(cfg))


def probe_seconds(cfg: TrackingConfig) -> float:
    """How long a tracking server has to answer whether it is ready: a short while, and
    never longer than ``tracking.timeout``."""
    return min(float(cfg.timeout), HEALTH_TIMEOUT_SECONDS)


def log_through(logger: SweepLogger, cfg: TrackingConfig, record: RunRecord) -> str:
    """Save ``record.json``, have ``logger`` (:func:`early_logger`) log it and wait until it
    has; return the run id. A failure raises the error :func:`~ragsweep.tracking.log.log_run`
    raises (a logger that died is replaced by logging here, :meth:`SweepLogger.drain`)."""
    save_record(cfg, record)
    logger.submit(record.artifacts_dir)
    (logged,) = logger.close(once=True)  # one "waiting for..." line on stderr at most
    if logged.error is not None or logged.run_id is None:
        raise not_logged(cfg, record.artifacts_dir, logged.error or "no run id")
    return logged.run_id


# -- a sweep -------------------------------------------------------------------------------


class Pipes:
    """The transport to a command's own logger process: requests on its standard input."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    def send(self, requests: Iterable[dict[str, Any]]) -> bool:
        """Write request lines; False when the logger is gone."""
        return send(self.process, requests)

    def close(self) -> None:
        """Nothing more to send."""
        _close_requests(self.process)

    def wait(self) -> None:
        """Wait for the logger to exit."""
        self.process.wait()


class SweepLogger:
    """A running logger and the requests a sweep handed to it.

    A thread reads the logger's answers as they come, so the logger never waits on a full
    pipe while the sweep computes; :meth:`drain` waits for the answers to every request so
    far. ``transport``: a command's own logger process (:class:`Pipes`) or a session with
    the resident one (:class:`ragsweep.tracking.resident.Connection`, whose outcome lines
    the reader writes to ``echo``, the output file). ``tracking``: the sweep's store
    settings (tags are set there).
    """

    def __init__(
        self,
        transport: Pipes | resident.Connection,
        answers: IO[str],
        output: Path,
        tracking: TrackingConfig,
        echo: IO[str] | None = None,
    ) -> None:
        self.transport = transport
        self.output = output
        self.tracking = tracking
        self.label = "the sweep's MLflow logger"
        """Who is waited for, in the progress line of :meth:`drain`."""
        self.pid = os.getpid()
        self._done = threading.Condition()
        self._pending: list[dict[str, Any]] = []
        self._answers: dict[str, Logged] = {}
        self._ended = False
        self._sent = 0
        self.failed: list[Logged] = []
        """Every request that failed so far (reported as it was drained)."""
        self._reader = threading.Thread(target=self._read, args=(answers, echo), daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, output: Path, tracking: TrackingConfig) -> SweepLogger:
        """Start the logger, its output in ``output``, and have it open ``tracking``'s store
        (:func:`ragsweep.tracking.log.warm_up`); return at once. The settings go through its
        standard input: a URI may hold a password. With ``tracking.resident`` on a ready
        SQLite store, a session with the resident logger instead (:func:`_resident`)."""
        logger = _resident(output, tracking) if wants_resident(tracking) else None
        if logger is None:
            logger = cls._own(output, tracking)
        logger.transport.send([{WARM_UP: dataclasses.asdict(tracking)}])
        return logger

    @classmethod
    def _own(cls, output: Path, tracking: TrackingConfig) -> SweepLogger:
        """A logger process of this command's own."""
        answers, answer_end = os.pipe()
        try:  # a resumed sweep adds to the output
            process = spawn(
                output,
                f"--answers={answer_end}",
                pass_fds=(answer_end,),
                append=True,
                detached=False,
            )
        except OSError:
            os.close(answers)
            raise
        finally:
            os.close(answer_end)
        return cls(Pipes(process), os.fdopen(answers, "r", encoding="utf-8"), output, tracking)

    def submit(self, run_dir: Path) -> None:
        """Hand over ``run_dir`` (its ``record.json`` written) to be logged; return at once.
        With the logger gone, it is logged here at the next :meth:`drain`."""
        self._request({RUN_DIR: str(run_dir.resolve())})

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        """Have ``tags`` set on run ``run_id`` of the sweep's store; return at once."""
        self._request({TAGS: {"run_id": run_id, "tags": tags}})

    def drain(self, stream: IO[str] | None = None, once: bool = False) -> list[Logged]:
        """Wait until every request so far is done, saying so on ``stream`` (stderr) every
        few seconds (``once``: the first time only); those the logger did not answer (it
        died) are done in this process. Returns what became of each, in the order they were
        made, and forgets them."""
        out = stream or sys.stderr
        said = time.monotonic()
        with self._done:
            while not self._ended and self._waiting():
                self._done.wait(timeout=1.0)
                if time.monotonic() - said >= pending.PROGRESS_SECONDS:
                    message = (
                        f"waiting for {self.label}: {self._waiting()} run(s) "
                        f"still being logged (its output: {self.output})"
                    )
                    print("\n".join(wrap(message, terminal_width())), file=out, flush=True)
                    said = float("inf") if once else time.monotonic()
            requests, self._pending = self._pending, []
            answers = [self._answers.pop(r[KEY], None) for r in requests]
        outcome = [
            a if a is not None else _done_here(r, self.tracking)
            for r, a in zip(requests, answers, strict=True)
        ]
        self.failed.extend(o for o in outcome if o.error is not None)
        return outcome

    def close(self, stream: IO[str] | None = None, once: bool = False) -> list[Logged]:
        """Tell the logger there is nothing more, wait for its last answers and for it to
        exit; return what became of the requests not drained yet."""
        self.abandon()
        outcome = self.drain(stream, once)
        self.transport.wait()
        self._reader.join()
        return outcome

    def abandon(self) -> None:
        """Tell the logger there is nothing to log and return at once (the run was refused
        or failed before it had a record): it ends after opening the store."""
        self.transport.send([{END: True}])
        self.transport.close()

    def _request(self, request: dict[str, Any]) -> None:
        with self._done:
            self._sent += 1
            request = {KEY: str(self._sent), **request}
            self._pending.append(request)
            alive = not self._ended
        if not (alive and self.transport.send([request])):
            self._reader.join()  # its answers end too: drain knows what it did not answer

    def _waiting(self) -> int:
        return sum(r[KEY] not in self._answers for r in self._pending)

    def _read(self, answers: IO[str], echo: IO[str] | None) -> None:
        """The reader thread: record each answer as it comes (and write its line to
        ``echo``, when given), until the answers end or the connection drops."""
        try:
            with answers:
                for line in answers:
                    self._answered(parse_answer(line), echo)
        except OSError:  # the resident logger was killed with requests unread
            pass
        finally:
            if echo is not None:
                echo.close()
            with self._done:
                self._ended = True
                self._done.notify_all()

    def _answered(self, answer: tuple[str, Logged] | None, echo: IO[str] | None) -> None:
        if answer is None:
            return
        line = answer[1].line()
        if echo is not None and line is not None:
            echo.write(line + "\n")
            echo.flush()
        with self._done:
            self._answers[answer[0]] = answer[1]
            self._done.notify_all()


def wants_resident(tracking: TrackingConfig) -> bool:
    """Whether a logger for ``tracking`` is a session with the resident logger:
    ``tracking.resident`` on, and a SQLite store (the only kind that logger is for) that
    is ready (:func:`experiment_is_ready`)."""
    if not tracking.resident:
        return False
    try:
        uri = tracking_uri(tracking)
    except RagsweepError:
        return False
    return sqlite_path(uri) is not None and experiment_is_ready(uri, tracking.experiment)


def _resident(output: Path, tracking: TrackingConfig) -> SweepLogger | None:
    """A session with the resident logger, saying so in ``output``; None, with a one-line
    note there, when it cannot be used (then the command starts its own logger)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    echo = output.open("a", encoding="utf-8")
    try:
        connection, place = resident.connect(tracking.resident_idle_seconds)
    except OSError as exc:
        echo.write(f"note: not logging through the resident MLflow logger: {exc}\n")
        echo.close()
        return None
    echo.write(f"logging through the resident MLflow logger (its log: {place.log})\n")
    echo.flush()
    answers = connection.makefile("r", encoding="utf-8")
    return SweepLogger(resident.Connection(connection), answers, output, tracking, echo)


def _done_here(request: dict[str, Any], tracking: TrackingConfig) -> Logged:
    """Do ``request`` in this process: the logger died before it answered, perhaps while
    it was logging the run (:func:`ragsweep.tracking.log.log_run_once`)."""
    if RUN_DIR in request:
        return log_record(Path(request[RUN_DIR]), once=True)
    return tags_set(tracking, request[TAGS])


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
