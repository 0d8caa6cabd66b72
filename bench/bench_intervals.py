"""Issue 31: the bootstrap intervals of a run as ``eval/uncertainty.py`` draws them (one count
matrix per question type, every metric through one product) against one resample index
matrix for the whole run (every type's draws in one ``integers`` call with a per-case
bound, one ``bincount``, one product per type), side by side, alternating, in one process.

    python bench/bench_intervals.py [--repeats 21]

Each run's cases come from a real run (``tracking.enabled=false``, BM25) of the demo and of
the imported SQuAD dev half (``make import-squad``), in a temporary folder. The run-wide
matrix draws other resamples (other intervals), so it would have to be documented; it is
timed here to see whether it pays. Figures: bench/README.md, "Intervals".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from ragsweep.eval.scoring import _slices, mean_by_key
from ragsweep.eval.uncertainty import Bootstrap, percentile_bounds, stratified_intervals

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_run import evaluate, squad_overrides

Strata = Mapping[str, Sequence[Mapping[str, float]]]


def run_wide(strata: Strata, names: Sequence[str], bootstrap: Bootstrap) -> list[dict]:
    """The intervals from one resample index matrix over every case of every type."""
    rng = np.random.default_rng(bootstrap.seed)
    pick = itemgetter(*names)
    blocks = [np.array([pick(row) for row in rows], dtype=np.float64) for rows in strata.values()]
    sizes = np.array([len(block) for block in blocks])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    n, resamples = int(sizes.sum()), bootstrap.resamples
    with threadpool_limits(limits=1, user_api="blas"):
        draws = rng.integers(0, np.repeat(sizes, sizes), size=(resamples, n))
        draws += np.repeat(offsets, sizes) + np.arange(resamples)[:, None] * n
        counts = np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n)
        sums = [counts[:, o : o + s] @ b for o, s, b in zip(offsets, sizes, blocks, strict=True)]
    type_means = np.stack(sums) / sizes[:, None, None]
    overall = np.sum(sums, axis=0)[None] / n
    return percentile_bounds(
        np.concatenate([overall, type_means.min(axis=0)[None], type_means]), names
    )


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def measure(name: str, overrides: list[str], out: Path, repeats: int) -> None:
    results = evaluate(overrides, out).cases
    scored = [(r.type, r.metrics) for r in results if r.metrics is not None]
    strata = _slices(scored)
    names = list(mean_by_key([m for _, m in scored]))
    bootstrap = Bootstrap(1000, 0)
    today: list[float] = []
    wide: list[float] = []
    for _ in range(repeats):
        today.append(timed(lambda: stratified_intervals(strata, names, bootstrap)))
        wide.append(timed(lambda: run_wide(strata, names, bootstrap)))
    print(
        f"{name}: {len(scored)} answerable cases, {len(strata)} types, {len(names)} metrics; "
        f"per type (today) median {statistics.median(today):.1f} ms (min {min(today):.1f}), "
        f"run-wide matrix median {statistics.median(wide):.1f} ms (min {min(wide):.1f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        off = [f"cache.dir={work / 'cache'}", "tracking.enabled=false", "embedding=bm25"]
        demo = [f"paths.output_dir={work / 'demo'}", *off]
        measure("demo", demo, work / "demo-run", args.repeats)
        squad = squad_overrides(work / "squad", *off)
        measure("SQuAD", squad, work / "squad-run", args.repeats)


if __name__ == "__main__":
    main()
