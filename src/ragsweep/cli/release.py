"""Console scripts of the release tools (docs/promotion.md).

- ``ragsweep-promote RUN_ID | --best | --latest``: evaluate a tuning run's config on the
  holdout split; the new run id is printed on stdout (the report goes to stderr).
- ``ragsweep-compare BASELINE CANDIDATE [CANDIDATE ...]``: paired comparison, Markdown on
  stdout, logged as ``comparison.md``/``comparison.json`` on each candidate run; with several
  candidates the p-values are Holm-adjusted over them.
- ``ragsweep-gate check`` / ``ragsweep-gate ratchet RUN_ID --slack 0.05``.
- ``ragsweep-nightly``: gate + record in ``eval_logs/``.

The store is ``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else the project's configured
store. Errors print ``error: ...`` and exit 2; a failed gate exits 1.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from ragsweep.cli.errors import nonempty_argument, run_id_argument
from ragsweep.config.schema import TrackingConfig, from_mapping
from ragsweep.core import tags as tag
from ragsweep.core.errors import RagsweepError
from ragsweep.core.names import HOLDOUT, TUNING
from ragsweep.core.terminal import markdown_table
from ragsweep.release.compare import adjust_candidates, compare_runs, log_comparison
from ragsweep.release.comparison_markdown import render_markdown
from ragsweep.release.errors import RunLookupError, ThresholdsError
from ragsweep.release.gate import pinned_run, render_outcome, run_gate
from ragsweep.release.nightly import DEFAULT_DROP, run_nightly
from ragsweep.release.promote import DEFAULT_MAX_USES, DEFAULT_WINDOW_DAYS, promote
from ragsweep.release.store import (
    RunStore,
    current_config,
    current_tracking_uri,
)
from ragsweep.release.thresholds import (
    default_path,
    load_thresholds,
    project_path,
    ratchet,
    save_thresholds,
)
from ragsweep.tracking.store import apply_http_settings

EXIT_GATE_FAILED = 1
EXIT_ERROR = 2


def _reports_errors(main: Callable[[Sequence[str] | None], int]) -> Callable[..., None]:
    """Run ``main``; a RagsweepError becomes ``error: ...`` on stderr and exit status 2."""

    @functools.wraps(main)
    def wrapper(argv: Sequence[str] | None = None) -> None:
        try:
            status = main(argv)
        except RagsweepError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = EXIT_ERROR
        sys.exit(status)

    return wrapper


def _add_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tracking-uri",
        type=nonempty_argument,
        help="MLflow store (default: $MLFLOW_TRACKING_URI, else the project's tracking config)",
    )


def _open_store(args: argparse.Namespace) -> tuple[RunStore, dict[str, Any]]:
    config = current_config()
    apply_http_settings(from_mapping(TrackingConfig, config["tracking"], "tracking"))
    return RunStore(current_tracking_uri(config, args.tracking_uri)), config


def _stamp() -> str:
    return time.strftime("%Y-%m-%d_%H-%M-%S")


@_reports_errors
def promote_main(argv: Sequence[str] | None = None) -> int:
    """``ragsweep-promote``: see :mod:`ragsweep.release.promote`."""
    parser = argparse.ArgumentParser(
        prog="ragsweep-promote",
        description="Evaluate a tuning run's exact logged config on the holdout split.",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("run_id", nargs="?", type=run_id_argument, help="the tuning run to promote")
    which.add_argument(
        "--best", action="store_true", help=f"the newest run tagged {tag.BEST}=true (sweeps)"
    )
    which.add_argument("--latest", action="store_true", help="the newest complete tuning run")
    parser.add_argument(
        "--max-holdout-uses",
        type=int,
        default=DEFAULT_MAX_USES,
        help="warn when the golden set's holdout has been evaluated more often in the window",
    )
    parser.add_argument("--window-days", type=int, default=DEFAULT_WINDOW_DAYS)
    parser.add_argument("--output-dir", type=Path, help="artifacts of the holdout run")
    _add_store_option(parser)
    args = parser.parse_args(argv)
    store, config = _open_store(args)
    run_id = args.run_id if args.run_id is not None else _pick_tuning_run(store, args.best)
    output_dir = args.output_dir or (
        Path(config["paths"]["output_dir"]) / "promotions" / f"{_stamp()}-{run_id[:8]}"
    )
    console = Console(stderr=True)
    promotion = promote(store, run_id, output_dir, args.max_holdout_uses, args.window_days, console)
    print(promotion.report, file=sys.stderr)
    print(promotion.holdout.run_id)
    return 0


def _pick_tuning_run(store: RunStore, best: bool) -> str:
    query = f"tags.\"{tag.BEST}\" = 'true'" if best else f"tags.\"{tag.SPLIT}\" = '{TUNING}'"
    run = store.latest(query)
    if run is None:
        raise RunLookupError(f"no complete run matches {query} in {store.uri}")
    return run.run_id


@_reports_errors
def compare_main(argv: Sequence[str] | None = None) -> int:
    """``ragsweep-compare``: see :mod:`ragsweep.release.compare`."""
    parser = argparse.ArgumentParser(
        prog="ragsweep-compare",
        description="Compare two runs case by case over the same golden cases.",
    )
    parser.add_argument("baseline", type=run_id_argument)
    parser.add_argument(
        "candidate",
        nargs="+",
        type=run_id_argument,
        help="one or more; several are Holm-adjusted over each other",
    )
    parser.add_argument("--metric", help="primary per-case metric (default: eval.objective)")
    parser.add_argument(
        "--force", action="store_true", help="compare even if golden/split/corpus differ"
    )
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument(
        "--no-log", action="store_true", help="do not attach the comparison to the candidate"
    )
    _add_store_option(parser)
    args = parser.parse_args(argv)
    store, _ = _open_store(args)
    comparisons = [
        compare_runs(
            store,
            args.baseline,
            candidate,
            metric=args.metric,
            force=args.force,
            resamples=args.resamples,
            seed=args.seed,
            alpha=args.alpha,
        )
        for candidate in args.candidate
    ]
    for comparison in adjust_candidates(comparisons):
        markdown = render_markdown(comparison)
        print(markdown)
        if not args.no_log:
            log_comparison(store, comparison, markdown)
    return 0


@_reports_errors
def gate_main(argv: Sequence[str] | None = None) -> int:
    """``ragsweep-gate check|ratchet``: see :mod:`ragsweep.release.gate` and ``thresholds``."""
    parser = argparse.ArgumentParser(prog="ragsweep-gate", description="The release gate.")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="evaluate the promoted config and check it")
    check.add_argument(
        "--run", type=run_id_argument, help="promoted run to check (default: the newest)"
    )
    check.add_argument("--output-dir", type=Path)
    lift = commands.add_parser("ratchet", help="raise floors to a holdout run's values − slack")
    lift.add_argument("run_id", type=run_id_argument)
    lift.add_argument("--slack", type=float, default=0.05)
    lift.add_argument(
        "--allow-lower", action="store_true", help="also lower floors above the new values"
    )
    lift.add_argument(
        "--metric", action="append", default=[], help="add a floor for this metric (repeatable)"
    )
    for sub in (check, lift):
        sub.add_argument("--thresholds", type=Path, help="default: conf/gate/thresholds.yaml")
        _add_store_option(sub)
    args = parser.parse_args(argv)
    path = args.thresholds or default_path()
    if args.command == "check" and args.run is None:
        pinned_run()  # an empty $RAGSWEEP_GATE_RUN is refused before the store is opened
    store, config = _open_store(args)
    if args.command == "ratchet":
        return _ratchet(store, path, args)
    thresholds = load_thresholds(path)
    output_dir = args.output_dir or Path(config["paths"]["output_dir"]) / "gate" / _stamp()
    outcome = run_gate(store, thresholds, output_dir, args.run, Console(stderr=True))
    if outcome is None:
        print(f"nothing promoted yet in {store.uri}: nothing to check", file=sys.stderr)
        return 0
    print(render_outcome(outcome, thresholds))
    return 0 if outcome.passed else EXIT_GATE_FAILED


def _ratchet(store: RunStore, path: Path, args: argparse.Namespace) -> int:
    run = store.get(args.run_id)
    run.require_complete()
    if run.tag(tag.SPLIT) != HOLDOUT:
        raise ThresholdsError(
            f"run {run.run_id} is a {run.tag(tag.SPLIT)} run; floors are checked on the holdout "
            "split, so ratchet from a promoted (holdout) run"
        )
    thresholds, changes = ratchet(
        load_thresholds(path),
        run.metrics,
        args.slack,
        allow_lower=args.allow_lower,
        add=args.metric,
        source=f"run {run.run_id}",
    )
    target = args.thresholds or project_path()  # never the packaged defaults
    save_thresholds(target, thresholds, source=path)
    rows = [
        [
            c.metric,
            "—" if c.old is None else f"{c.old:g}",
            f"{c.proposed:g}",
            f"{c.new:g}",
            c.action,
        ]
        for c in changes
    ]
    print(markdown_table(["metric", "old floor", "run − slack", "new floor", "action"], rows))
    print(f"\nwrote {target}")
    return 0


@_reports_errors
def nightly_main(argv: Sequence[str] | None = None) -> int:
    """``ragsweep-nightly``: see :mod:`ragsweep.release.nightly`."""
    parser = argparse.ArgumentParser(
        prog="ragsweep-nightly",
        description="Run the gate and append its figures to eval_logs/YYYY-MM-DD.json.",
    )
    parser.add_argument("--log-dir", type=Path, help="default: eval_logs/ in the project root")
    parser.add_argument("--thresholds", type=Path, help="default: conf/gate/thresholds.yaml")
    parser.add_argument(
        "--drop", type=float, default=DEFAULT_DROP, help="fall that marks the day for review"
    )
    parser.add_argument("--work-dir", type=Path, help="artifacts of the gate's evaluation")
    _add_store_option(parser)
    args = parser.parse_args(argv)
    store, config = _open_store(args)
    log_dir = args.log_dir or Path(config["paths"]["root_dir"]) / "eval_logs"
    work_dir = args.work_dir or Path(config["paths"]["output_dir"]) / "nightly" / _stamp()
    thresholds = load_thresholds(args.thresholds or default_path())
    now = datetime.now().astimezone()
    day = run_nightly(store, thresholds, log_dir, work_dir, now, args.drop, Console(stderr=True))
    if day is None:
        print(f"nothing promoted yet in {store.uri}: nothing recorded", file=sys.stderr)
        return 0
    print(f"{day.path}: gate {day.entry['gate']}, day status: {day.status}")
    for line in [*day.entry["violations"], *day.entry["drops"]]:
        print(f"  - {line}")
    return 0 if day.entry["gate"] == "passed" else EXIT_GATE_FAILED
