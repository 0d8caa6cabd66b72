"""95% bootstrap intervals of means over cases.

Every mean a run reports (a metric averaged over its answerable cases: overall, for one
question type, or for the weakest type) carries a percentile bootstrap interval. Cases are
drawn with replacement *within their question type* ``resamples`` times from a generator
seeded with ``seed`` (a stratified bootstrap: every resample keeps the golden set's number
of cases per type, which is how a golden set is built). On each resample every mean is
recomputed: a type's mean from its drawn cases, the overall mean as the case-weighted mean of
the type means, the weakest type's as the minimum of the type means. The 2.5th and 97.5th
percentiles of a mean's resampled values bound its interval.

One count matrix per type (how often each of its cases is drawn in each resample) serves
every metric through one matrix product, and all intervals come from the same resamples.

The interval says how far a mean could move on another draw of cases like these, scored by
the same configuration; it assumes cases are independent draws within their type and says
nothing about cases unlike them. It is wide for few cases; for one case it is the point.
Two runs' intervals overlapping does not mean their difference is noise: a difference on the
same cases is judged by the paired test (``ragsweep-compare``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter

import numpy as np
from threadpoolctl import threadpool_limits

CONFIDENCE = 0.95

# Resample rows drawn at once: bounds a count matrix at about 2**22 cells.
_BATCH_CELLS = 1 << 22


@dataclass(frozen=True)
class Bootstrap:
    """How intervals are drawn: ``resamples`` resamples from generator ``seed``."""

    resamples: int
    seed: int

    def __post_init__(self) -> None:
        if self.resamples < 1:
            raise ValueError(f"resamples={self.resamples} must be >= 1")

    def describe(self) -> str:
        """One phrase stating the method, for reports."""
        return (
            f"{CONFIDENCE:.0%} percentile bootstrap over cases (resampled within each "
            f"question type), {self.resamples} resamples, seed {self.seed}"
        )


@dataclass(frozen=True)
class Bounds:
    """A confidence interval ``[low, high]`` in the units of its metric."""

    low: float
    high: float

    def describe(self, digits: int = 4) -> str:
        return f"[{self.low:.{digits}f}, {self.high:.{digits}f}]"


@dataclass(frozen=True)
class Intervals:
    """The intervals of a set of cases split into strata (question types), per metric:
    of the overall mean, of each stratum's mean, and of the lowest stratum mean."""

    overall: dict[str, Bounds]
    by_stratum: dict[str, dict[str, Bounds]]
    weakest: dict[str, Bounds]


def interval_keys(metric: str) -> tuple[str, str]:
    """The keys of the bounds of ``metric``'s interval (MLflow metric names):
    ``recall_at_5`` → ``recall_at_5_ci_low``, ``recall_at_5_ci_high``. The only place
    these names are written."""
    return f"{metric}_ci_low", f"{metric}_ci_high"


def resample_counts(n_cases: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of ``n_cases`` cases is drawn in each resample of ``n_cases`` draws
    with replacement: float64 ``(resamples, n_cases)``, every row summing to ``n_cases``."""
    draws = rng.integers(0, n_cases, size=(resamples, n_cases))
    draws += np.arange(resamples)[:, None] * n_cases  # a cell per (resample, case)
    # np.add.at, not np.bincount: with numpy 2.4 bincount was no faster (18.6 vs 17.5 ms at
    # 1,924 cases x 1000 resamples) and its int64 counts plus the float copy raise peak
    # memory by half (46 vs 31 MB); same counts either way (bench/README.md, "Intervals")
    counts = np.zeros(resamples * n_cases)
    np.add.at(counts, draws.ravel(), 1.0)
    return counts.reshape(resamples, n_cases)


def resampled_sums(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The sum of every column of ``values`` (``(n_cases, n_metrics)``) over each resample
    of its cases: ``(resamples, n_metrics)``."""
    n_cases = values.shape[0]
    if n_cases == 0:
        raise ValueError("a bootstrap needs at least one case")
    rows = max(1, _BATCH_CELLS // n_cases)
    sums = [
        resample_counts(n_cases, min(rows, resamples - begin), rng) @ values
        for begin in range(0, resamples, rows)
    ]
    return np.concatenate(sums)


def percentile_bounds(means: np.ndarray, names: Sequence[str]) -> list[dict[str, Bounds]]:
    """The central :data:`CONFIDENCE` interval of resampled ``means`` of shape
    ``(sets, resamples, len(names))``: per set, the bounds of each name."""
    tail = (1.0 - CONFIDENCE) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail], axis=1)
    return [
        {
            name: Bounds(lo, hi)
            for name, lo, hi in zip(names, low_row.tolist(), high_row.tolist(), strict=True)
        }
        for low_row, high_row in zip(low, high, strict=True)
    ]


def stratified_intervals(
    strata: Mapping[str, Sequence[Mapping[str, float]]],
    names: Sequence[str],
    bootstrap: Bootstrap,
) -> Intervals:
    """Intervals (module docstring) of the means of ``names`` over the cases of ``strata``
    (stratum name → one mapping of metric values per case, at least one case each)."""
    if not strata:
        return Intervals({}, {}, {})
    rng = np.random.default_rng(bootstrap.seed)
    pick = itemgetter(*names) if len(names) > 1 else lambda row: (row[names[0]],)
    sums, sizes = [], []
    # The products are small (resamples x one type's cases x metrics): BLAS threads cost more
    # than they give, and many times more when other processes share the cores.
    with threadpool_limits(limits=1, user_api="blas"):
        for rows in strata.values():
            values = np.array([pick(row) for row in rows], dtype=np.float64)
            values = values.reshape(len(rows), len(names))
            sums.append(resampled_sums(values, bootstrap.resamples, rng))
            sizes.append(len(rows))
    type_means = np.stack(sums) / np.array(sizes, dtype=np.float64)[:, None, None]
    overall = np.sum(sums, axis=0)[None] / sum(sizes)
    bounds = percentile_bounds(
        np.concatenate([overall, type_means.min(axis=0)[None], type_means]), names
    )
    return Intervals(bounds[0], dict(zip(strata, bounds[2:], strict=True)), bounds[1])
