"""``ragsweep-log RUN_DIR...``: log run directories to MLflow later.

Every run writes ``record.json`` (params, metrics, tags, dataset, store settings) into its
run directory before it logs to MLflow. When the store failed (a server that went down, a
full disk), or a background log did not finish (:mod:`ragsweep.tracking.background`), the run
directory is complete and this command logs it, into the store it was meant for or the one
given with ``--tracking-uri``. A record already logged (a run tagged with its
``ragsweep.record_id`` and ``ragsweep.logged=complete``) is skipped, so running the command
twice never makes a second run. It first waits for background logs still running on the
store.

``ragsweep-log --wait RUN_DIR...`` logs nothing: it waits for the background logs of the
stores of these run directories and says, per directory, whether it was logged.

Exit status: 0 when every directory is logged (or already was), 2 when any failed (each
failure is printed as ``error: DIR: ...``; the other directories are still handled).

``ragsweep-log --serve`` (not shown in the help) is the background logger a run or a sweep
starts (:mod:`ragsweep.tracking.logger`); ``ragsweep-log --resident`` the long-lived one
(:mod:`ragsweep.tracking.resident`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ragsweep.cli.errors import nonempty_argument
from ragsweep.config.schema import RESIDENT_IDLE_SECONDS, TrackingConfig
from ragsweep.core.errors import RagsweepError
from ragsweep.tracking.log import RunRecord, find_logged, load_record, log_run_once
from ragsweep.tracking.logger import serve
from ragsweep.tracking.resident import serve_resident
from ragsweep.tracking.store import forget_pending, tracking_uri

EXIT_ERROR = 2


class NotLoggedError(RagsweepError):
    """``--wait``: the run directory's record is not in the store."""


def _load(run_dir: Path, uri: str | None) -> tuple[TrackingConfig, RunRecord]:
    tracking, record = load_record(run_dir)
    if uri:
        tracking = dataclasses.replace(tracking, uri=uri)
    return tracking, record


def log_directory(run_dir: Path, uri: str | None) -> str:
    """Log ``run_dir`` (unless already logged); return a one-line account of what happened.
    What a killed logger of it left is mended (:func:`~ragsweep.tracking.log.log_run_once`): a
    complete run still RUNNING is closed, an incomplete one closed FAILED and the record
    logged again. A background log of it that did not finish is forgotten then (its
    marker, beside the store the run was configured with)."""
    tracking, record = _load(run_dir, uri)
    existing = find_logged(tracking, record)
    run_id = log_run_once(tracking, record)
    account = (
        f"{run_dir}: already logged as run {run_id}"
        if run_id == existing
        else f"{run_dir}: logged as run {run_id}"
    )
    configured, _ = load_record(run_dir)
    forget_pending(tracking_uri(configured), record.record_id)
    return account


def waited_directory(run_dir: Path, uri: str | None) -> str:
    """Wait for the background logs of ``run_dir``'s store; say whether it was logged."""
    tracking, record = _load(run_dir, uri)
    existing = find_logged(tracking, record)  # opening the store waits for pending logs
    if existing is None:
        raise NotLoggedError(
            f"not logged to {tracking_uri(tracking)}; `ragsweep-log {run_dir}` logs it"
        )
    return f"{run_dir}: logged as run {existing}"


def _run_dir(text: str) -> Path:
    """A RUN_DIR argument; an empty one is refused (``Path("")`` is the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty RUN_DIR names no run directory")
    return Path(text)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (see module docstring)."""
    parser = argparse.ArgumentParser(
        prog="ragsweep-log",
        description="Log run directories (with record.json) to MLflow, e.g. after the "
        "tracking store failed at the end of a run or a background log did not finish.",
    )
    parser.add_argument("run_dirs", nargs="*", type=_run_dir, metavar="RUN_DIR")
    parser.add_argument(
        "--tracking-uri",
        type=nonempty_argument,
        help="log here instead of the store the run was configured with",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="log nothing: wait for background logs of these runs and say if they landed",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # a logger
    parser.add_argument("--answers", type=int, help=argparse.SUPPRESS)  # pipe: a sweep's
    parser.add_argument("--after", type=int, help=argparse.SUPPRESS)  # pipe: the run's end
    parser.add_argument("--lock-fd", type=int, help=argparse.SUPPRESS)  # a marker's lock
    parser.add_argument("--resident", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--idle-seconds", type=int, default=RESIDENT_IDLE_SECONDS, help=argparse.SUPPRESS
    )
    parser.add_argument("--key", default="", help=argparse.SUPPRESS)  # the resident's
    args = parser.parse_args(argv)
    if args.resident:  # the resident logger (ragsweep.tracking.resident)
        os._exit(serve_resident(args.idle_seconds, args.key))
    if args.serve:
        status = serve(sys.stdin, args.answers, args.after, args.lock_fd)
        os._exit(status)  # every run is committed: skip tearing down MLflow's modules
    if not args.run_dirs:
        parser.error("at least one RUN_DIR is required")
    handle = waited_directory if args.wait else log_directory
    status = 0
    for run_dir in args.run_dirs:
        try:
            print(handle(run_dir, args.tracking_uri))
        except RagsweepError as exc:
            print(f"error: {run_dir}: {exc}", file=sys.stderr)
            status = EXIT_ERROR
    sys.exit(status)


if __name__ == "__main__":
    main()
