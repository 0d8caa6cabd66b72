"""95% bootstrap intervals of means over cases.

Every mean a run reports (a metric averaged over its answerable cases, overall or for one
question type) carries a percentile bootstrap interval: the cases are drawn with replacement
``resamples`` times from a seeded generator, the mean is recomputed on each resample, and the
2.5th and 97.5th percentiles of those means bound the interval. All metrics of one set of
cases share one resample matrix (how often each case is drawn in each resample), so every
metric's resampled means come from one matrix product.

The interval says how far the mean could move on another draw of cases like these, scored by
the same configuration; it assumes cases are independent draws, and says nothing about
cases unlike them. With few cases it is wide, and with one case it is the point itself.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95

# Resample rows drawn at once: bounds the count matrix at about 2**22 cells per batch.
_BATCH_CELLS = 1 << 22


@dataclass(frozen=True)
class Bootstrap:
    """How intervals are drawn: ``resamples`` per set of cases, from generator ``seed``."""

    resamples: int
    seed: int

    def __post_init__(self) -> None:
        if self.resamples < 1:
            raise ValueError(f"resamples={self.resamples} must be >= 1")

    def describe(self) -> str:
        """One phrase stating the method, for reports."""
        return (
            f"{CONFIDENCE:.0%} percentile bootstrap over cases, {self.resamples} resamples, "
            f"seed {self.seed}"
        )


@dataclass(frozen=True)
class Bounds:
    """A confidence interval ``[low, high]`` in the units of its metric."""

    low: float
    high: float

    def describe(self, digits: int = 4) -> str:
        return f"[{self.low:.{digits}f}, {self.high:.{digits}f}]"


def interval_keys(metric: str) -> tuple[str, str]:
    """The keys of the bounds of ``metric``'s interval (MLflow metric names):
    ``recall_at_5`` → ``recall_at_5_ci_low``, ``recall_at_5_ci_high``. The only place
    these names are written."""
    return f"{metric}_ci_low", f"{metric}_ci_high"


def generator(bootstrap: Bootstrap, stream: str = "") -> np.random.Generator:
    """The random generator of the resamples of the set of cases named ``stream``."""
    return np.random.default_rng([bootstrap.seed, zlib.crc32(stream.encode("utf-8"))])


def resample_counts(n_cases: int, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of ``n_cases`` cases is drawn in each resample of ``n_cases`` draws
    with replacement: int ``(resamples, n_cases)``, every row summing to ``n_cases``."""
    draws = rng.integers(0, n_cases, size=(resamples, n_cases))
    offsets = np.arange(resamples)[:, None] * n_cases
    counts = np.bincount((draws + offsets).ravel(), minlength=resamples * n_cases)
    return counts.reshape(resamples, n_cases)


def resampled_means(values: np.ndarray, bootstrap: Bootstrap, stream: str = "") -> np.ndarray:
    """The mean of every column of ``values`` (``(n_cases, n_metrics)``) on each resample:
    ``(resamples, n_metrics)``. ``stream`` names the set of cases (e.g. a question type) so
    that each set draws its own resamples, reproducibly from ``bootstrap.seed``."""
    n_cases = values.shape[0]
    if n_cases == 0:
        raise ValueError("a bootstrap needs at least one case")
    rng = generator(bootstrap, stream)
    rows = max(1, _BATCH_CELLS // n_cases)
    means = [
        resample_counts(n_cases, min(rows, bootstrap.resamples - begin), rng) @ values / n_cases
        for begin in range(0, bootstrap.resamples, rows)
    ]
    return np.concatenate(means)


def percentile_bounds(means: np.ndarray, names: Sequence[str]) -> dict[str, Bounds]:
    """The central :data:`CONFIDENCE` interval of each column of resampled ``means``
    (``(resamples, len(names))``), keyed by ``names``."""
    tail = (1.0 - CONFIDENCE) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail], axis=0)
    return {
        name: Bounds(float(lo), float(hi))
        for name, lo, hi in zip(names, low.tolist(), high.tolist(), strict=True)
    }


def intervals(
    rows: Sequence[Mapping[str, float]],
    names: Sequence[str],
    bootstrap: Bootstrap,
    stream: str = "",
) -> tuple[dict[str, Bounds], np.ndarray]:
    """Intervals of the mean of each of ``names`` over ``rows`` (one mapping per case), and
    the resampled means they came from (``(resamples, len(names))``, columns in the order
    of ``names``)."""
    values = np.array([[row[name] for name in names] for row in rows], dtype=np.float64)
    means = resampled_means(values.reshape(len(rows), len(names)), bootstrap, stream)
    return percentile_bounds(means, names), means
