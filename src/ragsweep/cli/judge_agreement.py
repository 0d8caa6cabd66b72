"""``ragsweep-judge-agreement RUN HUMAN``: how often a run's judge agrees with human verdicts.

``RUN`` is a run directory (or its ``cases.jsonl``) or an MLflow run id; ``HUMAN`` a JSONL
file of human verdicts (``ragsweep.judge.agreement``). The report gives exact agreement and
Cohen's kappa per axis, confusion tables, the disagreeing cases, and flags every axis below
the floors (``--floor``/``--kappa-floor``, by default the run's ``judge.agreement_floor`` and
``judge.kappa_floor``). For an MLflow run id (or with ``--run-id`` for a directory), the
result is also logged to that run: the ``judge/agreement/*`` metrics, the artifacts
``judge_agreement.md`` and ``judge_agreement.json``, and the tag
``ragsweep.judge.agreement_below_floor``. Unreadable input exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ragsweep.core import tags as tag
from ragsweep.core.errors import RagsweepError
from ragsweep.core.names import CASES_FILE
from ragsweep.data.corpus import jsonl_lines
from ragsweep.judge.agreement import (
    Agreement,
    AgreementError,
    Floors,
    compare,
    judged_records,
    load_human,
    load_judged,
    render,
    render_markdown,
)
from ragsweep.release.store import RunStore, current_config, current_tracking_uri

RUN_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class RunSource:
    """The judge records of a run, its ``judge`` config section (may be empty), and the
    MLflow run id to log to (None: do not log)."""

    records: dict[str, dict[str, Any]]
    judge_config: Mapping[str, Any]
    log_run_id: str | None


def floors_for(judge_config: Mapping[str, Any], exact: float | None, kappa: float | None) -> Floors:
    """Command-line floors, else the run's configured ones, else the defaults."""
    default = Floors()
    return Floors(
        exact if exact is not None else float(judge_config.get("agreement_floor", default.exact)),
        kappa if kappa is not None else float(judge_config.get("kappa_floor", default.kappa)),
    )


def local_source(path: Path, log_run_id: str | None) -> RunSource:
    """A run directory or ``cases.jsonl`` on disk (its ``config.yaml`` beside it, if any)."""
    records = load_judged(path)
    config_file = (path if path.is_dir() else path.parent) / "config.yaml"
    config: Any = {}
    if config_file.is_file():
        config = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
    judge = config.get("judge") if isinstance(config, dict) else None
    return RunSource(records, judge if isinstance(judge, dict) else {}, log_run_id)


def mlflow_source(run_id: str, tracking_uri: str | None, log: bool) -> RunSource:
    """A logged run: its ``cases.jsonl`` and ``config.yaml`` artifacts."""
    store = RunStore(current_tracking_uri(current_config(), tracking_uri))
    store.get(run_id)
    text = store.artifact_text(run_id, CASES_FILE)
    rows = [(n, json.loads(line)) for n, line in enumerate(jsonl_lines(text), 1) if line.strip()]
    records = judged_records(rows, f"{CASES_FILE} of run {run_id}")
    judge = store.config(run_id).get("judge")
    return RunSource(records, judge if isinstance(judge, dict) else {}, run_id if log else None)


def log_agreement(tracking_uri: str | None, run_id: str, result: Agreement, floors: Floors) -> None:
    """Add the agreement metrics, report artifacts and floor tag to an MLflow run."""
    from mlflow.entities import Metric

    store = RunStore(current_tracking_uri(current_config(), tracking_uri))
    now = int(time.time() * 1000)
    metrics = [Metric(k, v, now, 0) for k, v in sorted(result.metrics(floors).items())]
    store.client.log_batch(run_id, metrics=metrics)
    store.log_text(run_id, render_markdown(result, floors), "judge_agreement.md")
    text = json.dumps(result.to_json(floors), indent=2, ensure_ascii=False)
    store.log_text(run_id, text, "judge_agreement.json")
    store.set_tag(run_id, tag.JUDGE_AGREEMENT_BELOW_FLOOR, result.flagged_axes(floors))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ragsweep-judge-agreement",
        description="Agreement of a run's judge verdicts with human verdicts.",
    )
    parser.add_argument("run", help="run directory, its cases.jsonl, or an MLflow run id")
    parser.add_argument("human", type=Path, help="JSONL of human verdicts")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--floor", type=float, help="exact-agreement floor (0-1)")
    parser.add_argument("--kappa-floor", type=float, help="Cohen's kappa floor (-1..1)")
    parser.add_argument("--tracking-uri", help="MLflow store (default: the project's)")
    parser.add_argument("--run-id", help="log the result of a run directory to this MLflow run")
    parser.add_argument("--no-log", action="store_true", help="do not log to MLflow")
    return parser.parse_args(argv)


def resolve_source(args: argparse.Namespace) -> RunSource:
    """The run named on the command line: a path on disk, else an MLflow run id."""
    path = Path(args.run)
    if path.exists():
        return local_source(path, None if args.no_log else args.run_id)
    if RUN_ID.match(args.run):
        return mlflow_source(args.run, args.tracking_uri, not args.no_log)
    raise AgreementError(f"{args.run!r} is neither a run directory or file nor an MLflow run id")


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (exit status 2 on unreadable input)."""
    args = parse_args(argv)
    try:
        source = resolve_source(args)
        human = load_human(args.human)
        floors = floors_for(source.judge_config, args.floor, args.kappa_floor)
        result = compare(source.records, human)
        if source.log_run_id:
            log_agreement(args.tracking_uri, source.log_run_id, result, floors)
    except RagsweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.json:
        print(json.dumps(result.to_json(floors), indent=2, ensure_ascii=False))
    else:
        print(render(result, floors), end="")
        if source.log_run_id:
            print(f"logged to MLflow run {source.log_run_id}")
