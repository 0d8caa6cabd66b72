"""Statistics over per-case results, shared by run comparison and sweep decisions.

**Paired significance**: a two-sided randomization (sign-flip) test on per-case differences.
Under the null hypothesis that baseline and candidate are exchangeable on every case, each
per-case difference ``candidate − baseline`` is as likely to have either sign. The p-value is
the share of sign assignments whose mean difference is at least as far from zero as the
observed one. Cases with a zero difference are unaffected by a sign flip and drop out. When
the non-zero differences admit no more than ``resamples`` assignments, all of them are
enumerated (an exact p-value); otherwise ``resamples`` random assignments are drawn from a
seeded generator and p = (1 + hits) / (1 + resamples), which is never 0.

**Interval of a mean**: a percentile bootstrap. Cases are drawn with replacement
``resamples`` times from a seeded generator; the interval holds the central ``level`` share
of the resampled means. It treats the cases as a sample of the questions that matter and says
nothing about cases unlike them; with few cases it is too narrow rather than too wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Rows of random signs (or of resampled cases) drawn at once: bounds memory at about 2**22
# float64 values per batch.
_BATCH_CELLS = 1 << 22
# Relative tolerance for "at least as extreme": sums of the same values in another order.
_TIE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PairedTest:
    """Outcome of :func:`paired_randomization_test`.

    ``n`` paired observations, ``n_nonzero`` of them with a non-zero difference;
    ``mean_difference`` is mean(candidate − baseline) over all ``n``; ``resamples`` is the
    number of sign assignments evaluated (``2 ** n_nonzero`` when ``exact``); ``seed`` is the
    generator seed (None when exact).
    """

    n: int
    n_nonzero: int
    mean_difference: float
    p_value: float
    resamples: int
    exact: bool
    seed: int | None

    def describe(self) -> str:
        """One sentence stating the test, the p-value and how it was obtained."""
        how = (
            f"exact: all 2^{self.n_nonzero} = {self.resamples} sign assignments"
            if self.exact
            else f"{self.resamples} random sign assignments, seed {self.seed}"
        )
        return (
            f"paired randomization test (two-sided) over {self.n} cases "
            f"({self.n_nonzero} differ): mean difference {self.mean_difference:+.4f}, "
            f"p = {self.p_value:.4f} ({how})"
        )


def paired_randomization_test(
    differences: Sequence[float], resamples: int = 10_000, seed: int = 0
) -> PairedTest:
    """Two-sided sign-flip test of mean(``differences``) = 0 (see module docstring)."""
    if resamples < 1:
        raise ValueError(f"resamples={resamples} must be >= 1")
    values = np.asarray(differences, dtype=float)
    n = int(values.size)
    mean = float(values.mean()) if n else 0.0
    nonzero = values[values != 0.0]
    m = int(nonzero.size)
    if m == 0:
        return PairedTest(n, 0, mean, 1.0, 1, True, None)
    observed = abs(float(nonzero.sum()))
    threshold = observed - _TIE_TOLERANCE * max(1.0, observed)
    if m < 63 and 2**m <= resamples:
        signs = 1.0 - 2.0 * ((np.arange(2**m)[:, None] >> np.arange(m)) & 1)
        extreme = int(np.count_nonzero(np.abs(signs @ nonzero) >= threshold))
        return PairedTest(n, m, mean, extreme / 2**m, 2**m, True, None)
    rng = np.random.default_rng(seed)
    extreme = 0
    rows_per_batch = max(1, _BATCH_CELLS // m)
    for begin in range(0, resamples, rows_per_batch):
        rows = min(rows_per_batch, resamples - begin)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(rows, m))
        extreme += int(np.count_nonzero(np.abs(signs @ nonzero) >= threshold))
    return PairedTest(n, m, mean, (extreme + 1) / (resamples + 1), resamples, False, seed)


@dataclass(frozen=True)
class Interval:
    """A bootstrap interval of a mean, in the units of the values: ``low`` to ``high`` hold
    the central ``level`` share (0.95: 95%) of ``resamples`` resampled means (``seed``)."""

    low: float
    high: float
    level: float
    resamples: int
    seed: int


def bootstrap_interval(
    values: Sequence[float], resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> Interval:
    """Percentile bootstrap interval of mean(``values``) (see module docstring)."""
    if resamples < 1:
        raise ValueError(f"resamples={resamples} must be >= 1")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must be in (0, 1)")
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("a bootstrap interval needs at least one value")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    rows_per_batch = max(1, _BATCH_CELLS // data.size)
    for begin in range(0, resamples, rows_per_batch):
        rows = min(rows_per_batch, resamples - begin)
        picks = rng.integers(0, data.size, size=(rows, data.size))
        means[begin : begin + rows] = data[picks].mean(axis=1)
    tail = (1.0 - level) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return Interval(float(low), float(high), level, resamples, seed)
