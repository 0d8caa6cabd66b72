"""``ragsweep best [SWEEP_DIR|RUN_ID] [--json] [--tracking-uri URI]``: which configuration
a sweep chose, and the one command that reproduces it (docs/sweeps.md, "Which
configuration won?").

- no argument: the last sweep of this project, the ``sweep_result.yaml`` written last
  under ``<paths.output_dir>/multirun`` (read from the folder: MLflow is not imported);
- ``SWEEP_DIR``: the sweep in that folder;
- ``RUN_ID``: the sweep whose MLflow parent run that is, read from the store (its logged
  ``sweep_result.yaml``; the store as for ``ragsweep-promote``: ``--tracking-uri``, else
  ``MLFLOW_TRACKING_URI``, else the project's ``tracking`` config).

It prints the sweep (name, file, folder), the objective of the chosen configuration with
its 95% interval, what each axis decided against the value it started from (the paired
difference, its interval and p-value the sweep recorded) and the sweep's ``reproduce:``
command. A sweep that did not finish, a folder without one, an unknown run id: exit status 2.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from ragsweep.cli.errors import nonempty_argument, reported_errors
from ragsweep.config.app import compose, plain_config
from ragsweep.config.schema import TrackingConfig, from_mapping
from ragsweep.core.errors import RagsweepError
from ragsweep.core.terminal import command_lines, wrap
from ragsweep.eval.metric_keys import N_ANSWERABLE
from ragsweep.eval.uncertainty import interval_keys
from ragsweep.release.store import RunStore, current_tracking_uri
from ragsweep.run.objective import RunObjective
from ragsweep.sweep.grid import run_objective
from ragsweep.sweep.report import REPRODUCE, SUMMARY_FILE, p_text
from ragsweep.sweep.result import RESULT_FILE
from ragsweep.tracking.store import apply_http_settings

MULTIRUN_DIR = "multirun"
"""Where ``ragsweep -m`` writes, below ``paths.output_dir`` (conf/config.yaml)."""
RUN_ID = re.compile(r"^[0-9a-f]{32}$")
"""An MLflow run id."""


class BestError(RagsweepError):
    """No finished sweep where the user pointed (or none at all)."""


@dataclass(frozen=True)
class Found:
    """A sweep's ``sweep_result.yaml`` as data, where it was read from, and the chosen
    configuration's objective with its interval (None: not recorded where it was read)."""

    result: dict[str, Any]
    source: str
    folder: Path | None
    figures: RunObjective | None


def main(argv: Sequence[str]) -> int:
    """``ragsweep best``: see module docstring; returns the exit status."""
    args = _parser().parse_args(list(argv))
    with reported_errors():  # a bad project config: error: ..., status 2, no traceback
        found = find(args.target, args.tracking_uri)
    if args.json:
        print(json.dumps(best_json(found), indent=2, ensure_ascii=False))
    else:
        console = Console()
        for line in best_lines(found):
            _print(line, console)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragsweep best",
        description="The configuration a sweep chose, and the command that reproduces it.",
    )
    parser.add_argument(
        "target",
        nargs="?",
        help="a sweep's folder or its MLflow parent run id (default: the last sweep under "
        f"outputs/{MULTIRUN_DIR})",
    )
    parser.add_argument("--json", action="store_true", help="print it as JSON")
    parser.add_argument(
        "--tracking-uri",
        type=nonempty_argument,
        help="MLflow store for a RUN_ID (default: $MLFLOW_TRACKING_URI, else the project's "
        "tracking config)",
    )
    return parser


def find(target: str | None, tracking_uri: str | None = None) -> Found:
    """The finished sweep ``target`` names (module docstring)."""
    if target is None:
        return from_folder(last_sweep_dir(_output_dir() / MULTIRUN_DIR))
    if not target.strip():
        raise BestError("an empty argument names no sweep (omit it for the last sweep)")
    path = Path(target).expanduser()
    if path.exists():
        if not path.is_dir():
            raise BestError(f"{target} is a file: pass the sweep's folder")
        return from_folder(path)
    if RUN_ID.match(target):
        return from_run(target, tracking_uri)
    raise BestError(f"{target}: no such folder, and not an MLflow run id (32 hex digits)")


def _output_dir() -> Path:
    return Path(str(plain_config(compose())["paths"]["output_dir"]))


def last_sweep_dir(multirun: Path) -> Path:
    """The folder under ``multirun`` whose ``sweep_result.yaml`` was written last and says
    the sweep finished."""
    results = sorted(
        multirun.rglob(RESULT_FILE) if multirun.is_dir() else [],
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for path in results:
        if _complete(path):
            return path.parent
    raise BestError(
        f"no finished sweep under {multirun} (run one: ragsweep -m sweep=NAME; a grid has "
        f"no {RESULT_FILE}, its table is in its folder's {SUMMARY_FILE})"
    )


def _complete(path: Path) -> bool:
    """Whether ``path`` is a finished sweep's result; one that cannot be read or parsed
    (a sweep killed while writing it, a stray file) is passed over, not fatal."""
    try:
        return bool(_read_result(path).get("complete"))
    except BestError:
        return False


def from_folder(folder: Path) -> Found:
    """The finished sweep in ``folder``, with the chosen configuration's interval from
    its job's folder."""
    path = folder / RESULT_FILE
    if not path.is_file():
        grid = " (a grid? its table is in " + SUMMARY_FILE + ")"
        hint = grid if (folder / SUMMARY_FILE).is_file() else ""
        raise BestError(f"no {RESULT_FILE} in {folder}: not a sweep's folder{hint}")
    result = _finished(_read_result(path), str(path))
    final = result["final"]
    run_dir = Path(final["run_dir"]) if final.get("run_dir") else None
    figures = run_objective(run_dir, result["objective"]) if run_dir else None
    return Found(result, str(path), folder, figures)


def from_run(run_id: str, tracking_uri: str | None) -> Found:
    """The finished sweep whose MLflow parent run is ``run_id``, read from the store."""
    config = plain_config(compose())
    apply_http_settings(from_mapping(TrackingConfig, config["tracking"], "tracking"))
    store = RunStore(current_tracking_uri(config, tracking_uri))
    store.get(run_id)  # an unknown run id: a RunLookupError naming the store
    try:
        text = store.artifact_text(run_id, RESULT_FILE)
    except RagsweepError:
        raise BestError(f"run {run_id} is not a sweep's parent run (no {RESULT_FILE})") from None
    source = f"{RESULT_FILE} of run {run_id} in {store.uri}"
    result = _finished(_parse(text, source), source)
    final = result["final"]
    figures = _logged_figures(store, final.get("run_id"), result["objective"])
    folder = Path(final["run_dir"]).parent if final.get("run_dir") else None
    return Found(result, source, folder, figures)


def _logged_figures(store: RunStore, run_id: str | None, objective: str) -> RunObjective | None:
    """The chosen configuration's objective and interval as its child run logged them."""
    if not run_id:
        return None
    metrics = store.get(run_id).metrics
    low, high = interval_keys(objective)
    if not {objective, low, high} <= set(metrics):
        return None
    n = int(metrics.get(N_ANSWERABLE, 0))
    return RunObjective(metrics[objective], metrics[low], metrics[high], n)


def _read_result(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BestError(f"cannot read {path}: {exc}") from None
    return _parse(text, str(path))


def _parse(text: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BestError(f"{source} is not YAML: {exc}") from None
    if not isinstance(data, dict) or "axes" not in data:
        raise BestError(f"{source} is not a sweep's result")
    return data


def _finished(result: dict[str, Any], source: str) -> dict[str, Any]:
    if not result.get("complete") or not isinstance(result.get("final"), dict):
        raise BestError(
            f"the sweep in {source} did not finish: no configuration was chosen "
            "(resume it with the same command, or run it again)"
        )
    return result


def axis_decisions(result: Mapping[str, Any]) -> list[str]:
    """Per axis: ``1. chunking.size: 800 (start 400: +0.108 [+0.058, +0.161], p <0.001)``."""
    lines: list[tuple[tuple[int, int], str]] = [
        (
            (1, skipped["number"]),
            f"{skipped['number']}. {skipped['axis']}: skipped ({skipped['reason']})",
        )
        for skipped in result.get("skipped") or []
    ]
    for index, axis in enumerate(result["axes"], start=1):
        number = axis.get("number") or index  # not recorded before: file order
        pass_number = axis.get("pass") or 1  # a later pass of strategy confirm
        trials = axis["trials"]
        chosen = next((t for t in trials if t["value"] == axis["chosen"]), None)
        start = next((t for t in trials if t.get("incumbent")), None)
        again = f" (pass {pass_number})" if pass_number > 1 else ""
        text = f"{number}. {axis['axis']}{again}: {axis['chosen']}"
        if chosen is not None and chosen.get("objective") is not None:
            text += f" ({result['objective']} {chosen['objective']:.4f})"
        lines.append(((pass_number, number), text + _against_start(chosen, start)))
    return [line for _, line in sorted(lines, key=lambda item: item[0])]


def _against_start(chosen: Mapping[str, Any] | None, start: Mapping[str, Any] | None) -> str:
    """``; start 400 kept`` or ``; vs start 400: Δ +0.108 [+0.058, +0.161], p <0.001
    (adjusted 0.002)``."""
    if start is None or chosen is None:
        return ""
    if start is chosen:
        return "; the start value, kept"
    paired = start.get("vs_chosen") or {}
    if "delta" not in paired:  # start − chosen was not computed: no paired values
        reason = paired.get("unavailable", "not recorded")
        return f"; vs start {start['value']}: no paired comparison ({reason})"
    low, high = paired["interval"]
    adjusted = paired.get("p_adjusted")  # what the decision used (the sweep table's p adj)
    adjusted_text = "" if adjusted is None else f" (adjusted {p_text(adjusted)})"
    # recorded as start − chosen: turned around to read as the gain of the choice
    return (
        f"; vs start {start['value']}: Δ {-paired['delta']:+.3f} "
        f"[{-high:+.3f}, {-low:+.3f}], p {p_text(paired['p_value'])}{adjusted_text}"
    )


def best_lines(found: Found) -> list[str]:
    """What ``ragsweep best`` prints (module docstring)."""
    result, final = found.result, found.result["final"]
    objective = f"{result['objective']} ({result['direction']}) = {final['objective']:.4f}"
    figures = found.figures
    if figures is not None:
        objective += f" {figures.interval_text()} (95% interval, {figures.n} answerable cases)"
    else:
        objective += " (interval not recorded where it was read)"
    lines = [
        f"sweep {result['sweep']} ({result['file']})",
        f"  folder {found.folder}" if found.folder else f"  read from {found.source}",
        *([f"  parent run {result['parent_run_id']}"] if result.get("parent_run_id") else []),
        f"objective {objective}",
        f"decisions ({result['decision']}, alpha {result['alpha']:g}); Δ: chosen − start, "
        "paired on the same cases:",
        *(f"  {line}" for line in axis_decisions(result)),
        REPRODUCE + final["command"].removeprefix("ragsweep "),
    ]
    return lines


def best_json(found: Found) -> dict[str, Any]:
    """``--json``: the sweep, the chosen values, the objective and its interval, the
    command."""
    result, final, figures = found.result, found.result["final"], found.figures
    return {
        "sweep": result["sweep"],
        "file": result["file"],
        "result": found.source,
        "folder": None if found.folder is None else str(found.folder),
        "parent_run_id": result.get("parent_run_id"),
        "objective": result["objective"],
        "direction": result["direction"],
        "value": final["objective"],
        "interval": None if figures is None else [figures.low, figures.high],
        "chosen": result.get("chosen", {}),
        "decisions": axis_decisions(result),
        "run_id": final.get("run_id"),
        "config_hash": final.get("config_hash"),
        "command": final["command"],
    }


def _print(line: str, console: Console) -> None:
    if line.startswith(REPRODUCE):
        texts = command_lines(line, console.width, "")
    else:
        texts = wrap(line, console.width, "", "    ")
    for text in texts:
        console.print(text, markup=False, soft_wrap=True, highlight=False)
