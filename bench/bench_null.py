"""Error rate of a sweep's decisions under the null (issue 29; figures in bench/README.md).

    python bench/bench_null.py SWEEP_DIR [--sweeps 1000] [--resamples 2000] [--seed 0]

``SWEEP_DIR`` is a finished sweep's folder (``make sweep`` writes one under
``outputs/multirun/``): its jobs' ``cases.jsonl`` give the per-case objective of every
configuration the demo sweep evaluated on the demo tuning split. Each simulated sweep has
the sweep file's axes (their number of values) and settings (``decision``,
``min_improvement``, ``alpha``, ``family_size``); each axis starts from a real
configuration, and each other value of the axis is that configuration plus the per-case
differences of a real pair of configurations **with their signs flipped at random**: the
labels say nothing about which configuration is better (every value is equal in
distribution to the start), but the differences keep the demo's pattern of unchanged,
slightly and much changed cases. Every axis is decided by the sweep's own
:func:`ragsweep.sweep.select.decide`, with ``adjust: holm`` and with ``adjust: none``; a
sweep that adopts any value made a false decision. Printed: the share of such sweeps with a
95% Wilson interval, and the share of axes that adopt a value.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path

import yaml

from ragsweep.core.names import CASES_FILE
from ragsweep.eval.scoring import cases_from_jsonl
from ragsweep.sweep.family import HOLM, NO_ADJUSTMENT
from ragsweep.sweep.paired import CaseValues
from ragsweep.sweep.select import Candidate, DecisionSettings, decide
from ragsweep.sweep.spec import load_sweep


def configurations(sweep_dir: Path, objective: str) -> list[dict[str, float]]:
    """The per-case objective of every job of the sweep (folders 0, 1, ...)."""
    jobs = sorted((p for p in sweep_dir.iterdir() if (p / CASES_FILE).is_file()), key=_job)
    values = []
    for job in jobs:
        text = (job / CASES_FILE).read_text(encoding="utf-8")
        cases = cases_from_jsonl(text, str(job / CASES_FILE))
        values.append(dict(CaseValues.from_cases(cases, objective, str(job)).by_case))
    return values


def _job(path: Path) -> int:
    return int(path.name) if path.name.isdigit() else 1 << 30


def null_axis(
    rng: random.Random, configs: list[dict[str, float]], n_values: int
) -> list[Candidate]:
    """One axis under the null: a real start, and ``n_values - 1`` values whose per-case
    differences from it are a real pair's, each sign flipped at random."""
    start = rng.choice(configs)
    axis = [_candidate(start, "start")]
    for n in range(n_values - 1):
        a, b = rng.sample(configs, 2)
        flipped = {case: start[case] + rng.choice((1, -1)) * (a[case] - b[case]) for case in start}
        axis.append(_candidate(flipped, f"v{n}"))
    return axis


def _candidate(values: dict[str, float], name: str) -> Candidate:
    return Candidate(statistics.fmean(values.values()), name, CaseValues(values))


def simulate(
    configs: list[dict[str, float]],
    axis_sizes: list[int],
    settings: DecisionSettings,
    sweeps: int,
    seed: int,
) -> dict[str, dict[str, float]]:
    """Per adjustment: false sweeps, false comparisons and their totals (module docstring)."""
    rng = random.Random(seed)
    tally = {
        adjust: {"sweeps": 0, "false_sweeps": 0, "axes": 0, "false_axes": 0}
        for adjust in (HOLM, NO_ADJUSTMENT)
    }
    for _ in range(sweeps):
        axes = [null_axis(rng, configs, size) for size in axis_sizes]
        for adjust, counts in tally.items():
            rule = replace(settings, adjust=adjust)
            adopted = False
            for axis, size in zip(axes, axis_sizes, strict=True):
                changed = decide(axis, 0, rule, axis_weight=size).chosen != 0
                counts["axes"] += 1
                counts["false_axes"] += changed
                adopted |= changed
            counts["sweeps"] += 1
            counts["false_sweeps"] += adopted
    return {adjust: _rates(counts) for adjust, counts in tally.items()}


def _rates(counts: dict[str, int]) -> dict[str, float]:
    low, high = wilson(counts["false_sweeps"], counts["sweeps"])
    return {
        **counts,
        "false_sweep_rate": counts["false_sweeps"] / counts["sweeps"],
        "interval": [low, high],
        "false_axis_rate": counts["false_axes"] / counts["axes"],
    }


def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion."""
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-improvement", type=float, default=None)
    args = parser.parse_args()
    result = yaml.safe_load((args.sweep_dir / "sweep_result.yaml").read_text(encoding="utf-8"))
    spec = load_sweep(Path(result["file"]))
    settings = replace(spec.settings, resamples=args.resamples)
    if args.min_improvement is not None:
        settings = replace(settings, min_improvement=args.min_improvement)
    configs = configurations(args.sweep_dir, spec.objective)
    sizes = [len(axis.points()) for axis in spec.axes]
    began = time.perf_counter()
    rates = simulate(configs, sizes, settings, args.sweeps, args.seed)
    report = {
        "sweep": result["sweep"],
        "configurations": len(configs),
        "cases": len(configs[0]),
        "axes": sizes,
        "family_size": settings.family_size,
        "decision": settings.decision,
        "min_improvement": settings.min_improvement,
        "alpha": settings.alpha,
        "resamples": settings.resamples,
        "sweeps": args.sweeps,
        "seconds": round(time.perf_counter() - began, 1),
        "rates": rates,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
