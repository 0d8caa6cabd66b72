"""Paired statistics over per-case differences, shared by run comparison and sweep decisions.

One method gives both the p-value and the interval of a paired difference, so they cannot
disagree: the **paired randomization (sign-flip) test** and the interval obtained by
inverting it.

Under the hypothesis "the mean difference is θ" every shifted difference ``d_i − θ`` is as
likely to have either sign. Flipping the signs of a set *S* of cases keeps the sum of the
shifted differences at least the observed one (``Σ_i s_i (d_i − θ) ≥ Σ_i (d_i − θ)``)
exactly when *S* is empty or the mean of the flipped differences ``mean(d_S) ≤ θ``. So,
over all sign assignments (or ``resamples`` random ones):

- ``p_up(θ)``: the share of assignments with ``mean(d_S) ≤ θ`` (plus the observed one);
  it grows with θ. ``p_down(θ)``: the share with ``mean(d_S) ≥ θ``; it shrinks.
- the two-sided p-value of θ is ``min(1, 2 · min(p_up(θ), p_down(θ)))``; the reported
  ``p_value`` is that of θ = 0 (no difference).
- the ``level`` interval is every θ whose two-sided p-value exceeds ``1 − level``: the
  θ with ``p_up(θ) > (1 − level) / 2`` form a half-line, those with ``p_down`` another,
  so the set is an interval ``[low, high]`` whose ends are subset means.

Hence the interval excludes 0 exactly when ``p_value ≤ 1 − level``: both read the same
cumulative weights. At θ = 0 cases with a zero difference do not matter (flipping 0 changes
nothing), so the p-value equals the usual two-sided sign-flip test on the non-zero
differences; at θ ≠ 0 they do, which is why the interval uses every case.

When the ``m`` non-zero differences admit at most ``resamples`` sign assignments, all
``2**m`` are enumerated, and the ``z`` zero differences enter through how many of them are
flipped (binomial weights), so the test is **exact**. Otherwise ``resamples`` random
assignments are drawn from a generator seeded with ``seed`` and the observed assignment is
counted once in each tail, so a p-value is never 0 (a Monte Carlo test, valid at any
``resamples``). With ``m`` non-zero differences no two-sided sign-flip test can go below
``2 / 2**m`` (every one with the same sign): :meth:`PairedTest.can_reject` says whether a
level is reachable at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Rows of random signs drawn at once: bounds memory at about 2**22 float64 values per batch.
_BATCH_CELLS = 1 << 22
# Subset means this close to 0 (relative to the largest difference) are 0: sums of the same
# values in another order.
_TIE_TOLERANCE = 1e-9
# Flipped-zero counts further than this many standard deviations from z/2 carry a binomial
# weight below 1e-15 and are left out of an exact enumeration.
_BINOMIAL_SPAN = 8.5


@dataclass(frozen=True)
class PairedTest:
    """Outcome of :func:`paired_randomization_test`.

    ``n`` paired observations; ``gained`` of them with a positive difference (candidate
    higher), ``lost`` with a negative one (``n_nonzero = gained + lost``);
    ``mean_difference`` is mean(candidate − baseline) over all ``n``; ``p_value`` the
    two-sided p of "mean difference 0"; ``[low, high]`` the ``level`` interval of the mean
    difference from inverting the same test; ``resamples`` the number of sign assignments
    of the non-zero differences evaluated (``2 ** n_nonzero`` when ``exact``); ``seed`` the
    generator seed (None when exact).
    """

    n: int
    gained: int
    lost: int
    mean_difference: float
    p_value: float
    low: float
    high: float
    level: float
    resamples: int
    exact: bool
    seed: int | None

    @property
    def n_nonzero(self) -> int:
        return self.gained + self.lost

    @property
    def smallest_p(self) -> float:
        """The smallest two-sided p-value any sign-flip test can give on these cases."""
        return min(1.0, 2.0 ** (1 - self.n_nonzero))

    def can_reject(self, alpha: float) -> bool:
        """Whether enough cases differ for a two-sided test to reach p <= ``alpha``."""
        return self.smallest_p <= alpha

    def describe(self) -> str:
        """One sentence stating the test, the p-value, the interval and how they were
        obtained."""
        how = (
            f"exact: all 2^{self.n_nonzero} = {self.resamples} sign assignments"
            if self.exact
            else f"{self.resamples} random sign assignments, seed {self.seed}"
        )
        return (
            f"paired randomization test (two-sided) over {self.n} cases "
            f"({self.gained} gained, {self.lost} lost): mean difference "
            f"{self.mean_difference:+.4f}, {self.level:.0%} interval "
            f"[{self.low:+.4f}, {self.high:+.4f}] (the test inverted), "
            f"p = {self.p_value:.4f} ({how})"
        )


class _Flips:
    """The distribution of the mean of the flipped differences over the sign assignments:
    ``means`` sorted (assignments that flip at least one case), ``weights`` theirs, ``base``
    the weight of the assignments that flip nothing (counted in both tails), ``total`` the
    weight of all. ``up[i]`` is p_up at a θ with ``i`` means at or below it, ``down[j]``
    p_down at a θ with ``j`` means below it; p-value and interval both read these arrays."""

    def __init__(self, means: np.ndarray, weights: np.ndarray, base: float, total: float):
        order = np.argsort(means, kind="stable")
        self.means = means[order]
        cum = np.concatenate([[0.0], np.cumsum(weights[order])])
        self.up = (base + cum) / total
        self.down = (base + cum[-1] - cum) / total

    def p_value(self, theta: float) -> float:
        """Two-sided p-value of "the mean difference is ``theta``"."""
        up = self.up[int(np.searchsorted(self.means, theta, side="right"))]
        down = self.down[int(np.searchsorted(self.means, theta, side="left"))]
        return min(1.0, 2.0 * float(min(up, down)))

    def interval(self, level: float) -> tuple[float, float]:
        """Every θ whose p-value exceeds ``1 − level`` (unbounded on a side when too few
        assignments exist for that tail ever to be rejected)."""
        tail = (1.0 - level) / 2
        first = int(np.argmax(self.up > tail))  # up[-1] == 1 > tail: always found
        low = -math.inf if first == 0 else float(self.means[first - 1])
        above = self.down > tail  # down[0] == 1 > tail: always found
        last = int(above.size - 1 - np.argmax(above[::-1]))
        high = math.inf if last == self.means.size else float(self.means[last])
        return low, high


def paired_randomization_test(
    differences: Sequence[float], resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> PairedTest:
    """Two-sided sign-flip test of mean(``differences``) = 0 and its inverted ``level``
    interval (see module docstring)."""
    if resamples < 1:
        raise ValueError(f"resamples={resamples} must be >= 1")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must be in (0, 1)")
    values = np.asarray(differences, dtype=float)
    n = int(values.size)
    mean = float(values.mean()) if n else 0.0
    nonzero = values[values != 0.0]
    m, zeros = int(nonzero.size), n - int(nonzero.size)
    gained, lost = int(np.count_nonzero(nonzero > 0)), int(np.count_nonzero(nonzero < 0))
    if m == 0:
        return PairedTest(n, 0, 0, mean, 1.0, 0.0, 0.0, level, 1, True, None)
    exact = m < 63 and 2**m <= resamples
    flips = _exact(nonzero, zeros) if exact else _sampled(nonzero, zeros, resamples, seed)
    low, high = flips.interval(level)
    return PairedTest(
        n,
        gained,
        lost,
        mean,
        flips.p_value(0.0),
        low,
        high,
        level,
        2**m if exact else resamples,
        exact,
        None if exact else seed,
    )


def _subset_means(sums: np.ndarray, sizes: np.ndarray, scale: float) -> np.ndarray:
    """``sums / sizes`` with means within the tie tolerance of 0 set to 0 (``sizes`` > 0)."""
    means = sums / sizes
    means[np.abs(means) <= _TIE_TOLERANCE * scale] = 0.0
    return means


def _zero_counts(zeros: int) -> tuple[np.ndarray, np.ndarray]:
    """How many of ``zeros`` zero differences are flipped, and the binomial weight of each
    count (counts of negligible weight left out, the rest renormalized)."""
    spread = _BINOMIAL_SPAN * math.sqrt(zeros) / 2
    counts = np.arange(
        max(0, math.floor(zeros / 2 - spread)), min(zeros, math.ceil(zeros / 2 + spread)) + 1
    )
    weights = np.array([math.comb(zeros, int(k)) / 2**zeros for k in counts])
    return counts, weights / weights.sum()


def _exact(nonzero: np.ndarray, zeros: int) -> _Flips:
    """Every subset of the non-zero differences, with every count of flipped zeros."""
    m = nonzero.size
    flipped = ((np.arange(2**m)[:, None] >> np.arange(m)) & 1).astype(float)
    sums, sizes = flipped @ nonzero, flipped.sum(axis=1)
    counts, weights = _zero_counts(zeros)
    total_sizes = sizes[:, None] + counts[None, :]
    cell_weights = np.broadcast_to(weights / 2**m, total_sizes.shape)
    some = total_sizes > 0
    sums_all = np.broadcast_to(sums[:, None], total_sizes.shape)
    scale = float(np.abs(nonzero).max())
    means = _subset_means(sums_all[some], total_sizes[some], scale)
    base = float(cell_weights[~some].sum())
    return _Flips(means, cell_weights[some], base, 1.0)


def _sampled(nonzero: np.ndarray, zeros: int, resamples: int, seed: int) -> _Flips:
    """``resamples`` random sign assignments (seeded), plus the observed one."""
    rng = np.random.default_rng(seed)
    m = nonzero.size
    sums, sizes = np.empty(resamples), np.empty(resamples)
    rows_per_batch = max(1, _BATCH_CELLS // m)
    for begin in range(0, resamples, rows_per_batch):
        rows = min(rows_per_batch, resamples - begin)
        flipped = rng.choice(np.array([0.0, 1.0]), size=(rows, m))
        sums[begin : begin + rows] = flipped @ nonzero
        sizes[begin : begin + rows] = flipped.sum(axis=1)
    sizes += rng.binomial(zeros, 0.5, size=resamples)
    some = sizes > 0
    scale = float(np.abs(nonzero).max())
    means = _subset_means(sums[some], sizes[some], scale)
    return _Flips(means, np.ones(means.size), 1.0 + float(np.count_nonzero(~some)), resamples + 1.0)


def holm(p_values: Sequence[float], share: float) -> list[float]:
    """Holm-adjusted ``p_values`` (in the order given) of a family that has ``share`` of the
    level (1: the whole family; a sweep's axis: its part, see ``ragsweep.sweep.family``):
    the i-th smallest becomes ``min(1, max_{l <= i} (c − l + 1) · p_(l) / share)``."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share={share} must be in (0, 1]")
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, (len(p_values) - rank) * p_values[index] / share)
        adjusted[index] = min(1.0, running)
    return adjusted
