"""The bootstrap interval of a mean (ragsweep.eval.stats), against a plain re-implementation and
the normal approximation it should agree with on a large sample."""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest

from ragsweep.eval.stats import bootstrap_interval


def plain_percentile_bootstrap(
    values: list[float], resamples: int, seed: int, level: float
) -> tuple[float, float]:
    """The same procedure written out with the same generator, one resample at a time."""
    rng = np.random.default_rng(seed)
    means = [
        statistics.fmean(values[i] for i in rng.integers(0, len(values), len(values)))
        for _ in range(resamples)
    ]
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def test_interval_matches_a_plain_reimplementation() -> None:
    values = [1.0, 0.0, 0.5, 1.0, -1.0, 0.0, 0.25, 1.0, 0.0, 0.0, 1.0]
    interval = bootstrap_interval(values, resamples=500, seed=3, level=0.9)
    assert (interval.low, interval.high) == pytest.approx(
        plain_percentile_bootstrap(values, 500, 3, 0.9)
    )
    assert (interval.level, interval.resamples, interval.seed) == (0.9, 500, 3)


def test_interval_is_seeded_and_near_the_normal_approximation() -> None:
    rng = random.Random(11)
    values = [rng.gauss(0.1, 1.0) for _ in range(400)]
    interval = bootstrap_interval(values, resamples=4000, seed=5)
    assert bootstrap_interval(values, resamples=4000, seed=5) == interval
    mean = statistics.fmean(values)
    half_width = 1.96 * statistics.pstdev(values) / len(values) ** 0.5
    assert interval.low == pytest.approx(mean - half_width, abs=0.02)
    assert interval.high == pytest.approx(mean + half_width, abs=0.02)


def test_constant_values_give_a_point_interval() -> None:
    interval = bootstrap_interval([0.25] * 7, resamples=100)
    assert (interval.low, interval.high) == pytest.approx((0.25, 0.25))


@pytest.mark.parametrize(
    ("values", "kwargs", "message"),
    [
        ([], {}, "at least one value"),
        ([1.0], {"resamples": 0}, "resamples=0"),
        ([1.0], {"level": 1.0}, "level=1.0"),
    ],
)
def test_invalid_arguments(values: list[float], kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bootstrap_interval(values, **kwargs)  # type: ignore[arg-type]
