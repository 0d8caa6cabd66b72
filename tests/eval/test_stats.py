"""The paired sign-flip test and its inverted interval (ragsweep.eval.stats), against a plain
enumeration of every sign assignment, and the property the sweep table relies on: the
interval excludes 0 exactly when p <= 1 - level."""

from __future__ import annotations

import itertools
import math
import random
import statistics

import pytest

from ragsweep.eval.stats import paired_randomization_test


def plain_p(differences: list[float], theta: float) -> float:
    """Two-sided p of "mean = theta" by enumerating every sign of every shifted difference
    (doubled smaller tail, as the module defines it)."""
    shifted = [d - theta for d in differences]
    observed = sum(shifted)
    up = down = 0
    for signs in itertools.product((1.0, -1.0), repeat=len(shifted)):
        total = sum(s * x for s, x in zip(signs, shifted, strict=True))
        up += total >= observed - 1e-12
        down += total <= observed + 1e-12
    count = 2 ** len(shifted)
    return min(1.0, 2 * min(up, down) / count)


def plain_abs_p(differences: list[float]) -> float:
    """The usual two-sided sign-flip p of mean = 0: |sum| at least the observed one."""
    observed = abs(sum(differences))
    hits = sum(
        abs(sum(s * d for s, d in zip(signs, differences, strict=True))) >= observed - 1e-12
        for signs in itertools.product((1.0, -1.0), repeat=len(differences))
    )
    return hits / 2 ** len(differences)


CASES = [
    [1.0, 1.0, 0.0, 1.0, 0.0, 1.0, -1.0, 1.0, 1.0, 0.0, 1.0],
    [0.5, 0.0, 0.25, 1.0, -0.5, 0.0, 0.75, 1.0, 0.5],
    [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [-1.0, 0.5, 0.0, 0.0, 1.0, -0.25, 0.0, 0.0],
]


@pytest.mark.parametrize("differences", CASES)
def test_exact_test_matches_a_plain_enumeration(differences: list[float]) -> None:
    test = paired_randomization_test(differences, level=0.9)
    assert test.exact
    assert test.p_value == pytest.approx(plain_abs_p(differences))
    assert test.p_value == pytest.approx(plain_p(differences, 0.0))
    # the interval's ends are accepted, anything just outside them is rejected
    for end, outside in ((test.low, test.low - 1e-6), (test.high, test.high + 1e-6)):
        assert math.isfinite(end)
        assert plain_p(differences, end) > 0.1
        assert plain_p(differences, outside) <= 0.1
    assert test.low <= test.mean_difference <= test.high


def test_interval_excludes_zero_exactly_when_p_reaches_the_level() -> None:
    rng = random.Random(3)
    seen = {True: 0, False: 0}
    for trial in range(300):
        n = rng.randint(4, 60)
        share = rng.random()
        differences = [
            rng.choice([1.0, -1.0, 0.5]) if rng.random() < share else 0.0 for _ in range(n)
        ]
        differences[0] = 1.0
        resamples = rng.choice([64, 500, 2000])
        for level in (0.9, 0.95):
            test = paired_randomization_test(differences, resamples, seed=trial, level=level)
            excludes = not test.low <= 0.0 <= test.high
            assert excludes == (test.p_value <= 1 - level), (differences, test)
            seen[excludes] += 1
    assert min(seen.values()) > 30  # both outcomes were exercised, exact and sampled


def test_few_changed_cases_cannot_reject() -> None:
    # the case: 38 cases, 4 changed the same way: p = 2 / 2^4, the interval holds 0
    test = paired_randomization_test([1.0] * 4 + [0.0] * 34)
    assert (test.gained, test.lost, test.n_nonzero) == (4, 0, 4)
    assert test.p_value == pytest.approx(0.125)
    assert test.low == 0.0 < test.high
    assert not test.can_reject(0.05) and test.smallest_p == 0.125
    assert paired_randomization_test([1.0] * 6 + [0.0] * 30).can_reject(0.05)
    # three cases: no sign-flip test can reject anything, the interval is unbounded
    tiny = paired_randomization_test([1.0, 1.0, 1.0])
    assert (tiny.low, tiny.high) == (-math.inf, math.inf)


def test_sampled_test_is_seeded_and_near_the_exact_one() -> None:
    differences = [1.0, -0.5, 1.0, 0.5, 1.0, 1.0, -1.0, 0.5, 1.0, 0.25, 1.0, 0.5]
    exact = paired_randomization_test(differences, resamples=4096)
    sampled = paired_randomization_test(differences, resamples=4095, seed=7)
    assert exact.exact and not sampled.exact
    assert abs(exact.p_value - sampled.p_value) < 0.03
    assert (sampled.low, sampled.high) == pytest.approx((exact.low, exact.high), abs=0.1)
    assert paired_randomization_test(differences, resamples=4095, seed=7) == sampled
    # sampled p-values count the observed assignment in each tail, so they are never 0
    extreme = paired_randomization_test([1.0] * 20, resamples=999, seed=0)
    assert extreme.p_value == pytest.approx(2 / 1000)


def test_interval_is_near_the_normal_approximation_on_many_cases() -> None:
    rng = random.Random(11)
    values = [rng.gauss(0.1, 1.0) for _ in range(400)]
    test = paired_randomization_test(values, resamples=4000, seed=5)
    mean = statistics.fmean(values)
    half_width = 1.96 * statistics.pstdev(values) / len(values) ** 0.5
    assert test.low == pytest.approx(mean - half_width, abs=0.02)
    assert test.high == pytest.approx(mean + half_width, abs=0.02)


@pytest.mark.parametrize(
    ("kwargs", "message"), [({"resamples": 0}, "resamples=0"), ({"level": 1.0}, "level=1.0")]
)
def test_invalid_arguments(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        paired_randomization_test([1.0], **kwargs)  # type: ignore[arg-type]
