"""``ragsweep-log RUN_DIR...``: log run directories whose tracking store failed at the end.

Every run writes ``record.json`` (params, metrics, tags, dataset, store settings) into its
run directory before it logs to MLflow. When the store failed (a server that went down, a
full disk), the run directory is complete and this command logs it later, into the store
it was meant for or the one given with ``--tracking-uri``. A record already logged (a run
tagged with its ``ragsweep.record_id`` and ``ragsweep.logged=complete``) is skipped, so
running the command twice never makes a second run.

Exit status: 0 when every directory is logged (or already was), 2 when any failed (each
failure is printed as ``error: DIR: ...``; the other directories are still logged).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from ragsweep.errors import RagsweepError
from ragsweep.tracking import find_logged, load_record, log_run

EXIT_ERROR = 2


def log_directory(run_dir: Path, uri: str | None) -> str:
    """Log ``run_dir`` (unless already logged); return a one-line account of what happened."""
    tracking, record = load_record(run_dir)
    if uri:
        tracking = dataclasses.replace(tracking, uri=uri)
    existing = find_logged(tracking, record)
    if existing is not None:
        return f"{run_dir}: already logged as run {existing}"
    return f"{run_dir}: logged as run {log_run(tracking, record)}"


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (see module docstring)."""
    parser = argparse.ArgumentParser(
        prog="ragsweep-log",
        description="Log run directories (with record.json) to MLflow, e.g. after the "
        "tracking store failed at the end of a run.",
    )
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    parser.add_argument(
        "--tracking-uri", help="log here instead of the store the run was configured with"
    )
    args = parser.parse_args(argv)
    status = 0
    for run_dir in args.run_dirs:
        try:
            print(log_directory(run_dir, args.tracking_uri))
        except RagsweepError as exc:
            print(f"error: {run_dir}: {exc}", file=sys.stderr)
            status = EXIT_ERROR
    sys.exit(status)


if __name__ == "__main__":
    main()
