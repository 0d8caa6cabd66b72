"""Search strategies side by side (issue 29; figures in bench/README.md).

    python bench/bench_strategies.py demo|squad [--out outputs/bench_strategies]

For each strategy's sweep file of the data set (demo: ``sweeps/chunking.yaml``,
``bench/chunking_confirm.yaml``, ``bench/chunking_optuna.yaml``; SQuAD, imported first with
``make import-squad``: ``bench/squad_{one_axis,confirm,optuna}.yaml``), two whole
``ragsweep -m`` processes in a row, MLflow on, each a new sweep (``hydra.sweeper.resume=
false``) on a stage cache of its own (``cache.dir=<out>/<data>/<strategy>/cache``): *cold*
on the empty cache, then *warm* on the cache the cold run filled. Printed as a Markdown
table: the jobs launched and configurations evaluated, both wall times, the winner with its
objective and 95% interval (``ragsweep best --json``), and the winner against the one-pass
winner on the same cases (the paired randomization test, 10,000 sign assignments, seed 0;
unadjusted: this comparison is not one of the sweep's decisions) with, for ``optuna``,
what its own decision said (adopted or kept, adjusted p).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from ragsweep.sweep.paired import CaseValues, PairedDifference, paired_difference, read_case_values
from ragsweep.sweep.report import p_text

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FILES = {
    "demo": {
        "one_axis": REPO / "sweeps" / "chunking.yaml",
        "confirm": REPO / "bench" / "chunking_confirm.yaml",
        "optuna": REPO / "bench" / "chunking_optuna.yaml",
    },
    "squad": {s: REPO / "bench" / f"squad_{s}.yaml" for s in ("one_axis", "confirm", "optuna")},
}


def sweep(path: Path, folder: Path, cache: Path) -> float:
    """Run the sweep file at ``path`` into ``folder``; its wall time in seconds."""
    command = [
        str(BIN / "ragsweep"),
        "-m",
        f"sweep={path}",
        "hydra.sweeper.resume=false",
        f"hydra.sweep.dir={folder}",
        f"cache.dir={cache}",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    (folder.parent / f"{folder.name}.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return seconds


def best(folder: Path) -> dict[str, Any]:
    command = [str(BIN / "ragsweep"), "best", str(folder), "--json"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout))


def cases(result: dict[str, Any]) -> CaseValues:
    final = result["final"]
    values = read_case_values(result["objective"], Path(final["run_dir"]), None, None)
    assert isinstance(values, CaseValues), values
    return values


def row(strategy: str, runs: dict[str, Any], one_pass: dict[str, Any]) -> list[str]:
    result, chosen = runs["result"], runs["best"]
    low, high = chosen["interval"]
    launched = result["configurations"]
    versus = "the same configuration"
    if result["final"]["config_hash"] != one_pass["final"]["config_hash"]:
        paired = paired_difference(cases(result), cases(one_pass), 10_000, 0, 0.95)
        assert isinstance(paired, PairedDifference)
        versus = (
            f"Δ {paired.delta:+.4f} [{paired.interval[0]:+.4f}, {paired.interval[1]:+.4f}], "
            f"+{paired.test.gained}/−{paired.test.lost}, p {p_text(paired.p_value)}"
        )
    search = result.get("search")
    if search is not None:
        versus += f"; its decision: {search['why']}"
    final = result["final"]["config_hash"]
    point = next(e["point"] for e in result["evaluated"] if e["config_hash"] == final)
    return [
        f"`{strategy}`",
        str(result["passes"]) + (f" + {len(search['trials'])} trials" if search else ""),
        str(launched),
        f"{runs['cold']:.0f} s",
        f"{runs['warm']:.0f} s",
        ", ".join(point.values()),
        f"{result['final']['objective']:.4f} [{low:.3f}, {high:.3f}]",
        str(result["family_size"]),
        versus,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", choices=sorted(FILES))
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "bench_strategies")
    args = parser.parse_args()
    measured: dict[str, dict[str, Any]] = {}
    for strategy, path in FILES[args.data].items():
        base = args.out / args.data / strategy
        base.mkdir(parents=True, exist_ok=True)
        cold = sweep(path, base / "cold", base / "cache")
        warm = sweep(path, base / "warm", base / "cache")
        result = yaml.safe_load((base / "warm" / "sweep_result.yaml").read_text())
        measured[strategy] = {
            "cold": cold,
            "warm": warm,
            "result": result,
            "best": best(base / "warm"),
        }
        print(f"{strategy}: cold {cold:.1f} s, warm {warm:.1f} s", file=sys.stderr)
    header = [
        "strategy",
        "passes",
        "configurations evaluated",
        "wall, cold",
        "wall, warm",
        "winner",
        "recall@2000c [95%]",
        "family size",
        "against the one-pass winner",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    one_pass = measured["one_axis"]["result"]
    for strategy, runs in measured.items():
        print("| " + " | ".join(row(strategy, runs, one_pass)) + " |")


if __name__ == "__main__":
    main()
