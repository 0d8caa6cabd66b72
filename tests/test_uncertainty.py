"""Bootstrap intervals: the resampling machinery, its statistics, and the run summary."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsweep.config import EvalConfig
from ragsweep.evaluate import CaseResult, summarize
from ragsweep.uncertainty import (
    Bootstrap,
    generator,
    interval_keys,
    intervals,
    resample_counts,
    resampled_means,
)


def test_resample_counts_draw_n_cases_per_resample() -> None:
    counts = resample_counts(50, 200, np.random.default_rng(1))
    assert counts.shape == (200, 50)
    assert (counts.sum(axis=1) == 50).all()
    assert counts.min() == 0 and counts.max() > 1  # with replacement


def test_resampled_means_are_means_of_the_drawn_cases() -> None:
    rng = np.random.default_rng(0)
    values = rng.random((37, 3))
    bootstrap = Bootstrap(resamples=300, seed=4)
    draws = generator(bootstrap, "x").integers(0, 37, size=(300, 37))
    plain = np.stack([values[row].mean(axis=0) for row in draws])
    assert resampled_means(values, bootstrap, "x") == pytest.approx(plain, abs=1e-12)


def test_many_resamples_are_drawn_in_parts() -> None:
    values = np.arange(5000, dtype=float)[:, None] % 2
    means = resampled_means(values, Bootstrap(resamples=2000, seed=0))
    assert means.shape == (2000, 1)
    assert len(np.unique(means)) > 100  # every part draws new resamples


def test_interval_of_a_proportion_matches_the_normal_approximation() -> None:
    rows = [{"hit_at_1": float(i % 2)} for i in range(400)]
    bounds, _ = intervals(rows, ["hit_at_1"], Bootstrap(resamples=4000, seed=0))
    half_width = 1.959964 * math.sqrt(0.5 * 0.5 / 400)
    assert bounds["hit_at_1"].low == pytest.approx(0.5 - half_width, abs=0.01)
    assert bounds["hit_at_1"].high == pytest.approx(0.5 + half_width, abs=0.01)


def test_a_constant_metric_and_a_single_case_have_point_intervals() -> None:
    bounds, _ = intervals([{"m": 0.25}] * 30, ["m"], Bootstrap(100, 0))
    assert (bounds["m"].low, bounds["m"].high) == (0.25, 0.25)
    single, _ = intervals([{"m": 0.7}], ["m"], Bootstrap(100, 0))
    assert (single["m"].low, single["m"].high) == pytest.approx((0.7, 0.7))


def test_the_seed_decides_the_interval() -> None:
    rows = [{"m": float(i % 3 == 0)} for i in range(60)]
    first, _ = intervals(rows, ["m"], Bootstrap(500, 1))
    again, _ = intervals(rows, ["m"], Bootstrap(500, 1))
    other, _ = intervals(rows, ["m"], Bootstrap(500, 2))
    assert first == again
    assert first != other


def test_rejects_no_resamples_and_no_cases() -> None:
    with pytest.raises(ValueError, match="resamples=0"):
        Bootstrap(0, 0)
    with pytest.raises(ValueError, match="at least one case"):
        resampled_means(np.zeros((0, 2)), Bootstrap(10, 0))


# --- the run summary ------------------------------------------------------------------------


def _case(index: int, type_name: str, hit: float) -> CaseResult:
    metrics = {"hit_at_1": hit, "recall_at_1": hit / 2}
    return CaseResult(f"q{index}", type_name, "tuning", True, metrics, (), 0.001)


def _cases(types: dict[str, int]) -> list[CaseResult]:
    out = []
    for type_name, n in types.items():
        out += [_case(len(out), type_name, float((len(out) + i) % 3 != 0)) for i in range(n)]
    out.append(CaseResult("none", "negative", "tuning", False, None, (), 0.001))
    return out


def test_summary_carries_an_interval_for_every_mean() -> None:
    summary = summarize(_cases({"a": 40, "b": 12}), EvalConfig(bootstrap_resamples=500))
    assert set(summary.intervals) == set(summary.overall) == {"hit_at_1", "recall_at_1"}
    for name, value in summary.overall.items():
        assert summary.intervals[name].low <= value <= summary.intervals[name].high
    for type_name, means in summary.by_type.items():
        for name, value in means.items():
            bounds = summary.by_type_intervals[type_name][name]
            assert bounds.low <= value <= bounds.high
    assert summary.scored_counts == {"a": 40, "b": 12}
    a, b = summary.by_type_intervals["a"]["hit_at_1"], summary.by_type_intervals["b"]["hit_at_1"]
    assert b.high - b.low > a.high - a.low  # fewer cases, a wider interval


def test_the_weakest_type_interval_lies_below_every_type_interval() -> None:
    # each resample's minimum is at most every type's mean on that resample
    summary = summarize(_cases({"a": 30, "b": 9, "c": 15}), EvalConfig(bootstrap_resamples=500))
    for name, bounds in summary.by_type_min_intervals.items():
        for per_type in summary.by_type_intervals.values():
            assert bounds.low <= per_type[name].low
            assert bounds.high <= per_type[name].high


def test_a_type_keeps_its_interval_when_another_type_is_added() -> None:
    cfg = EvalConfig(bootstrap_resamples=300, seed=3)
    two = summarize(_cases({"a": 20, "b": 10}), cfg)
    three = summarize(_cases({"a": 20, "b": 10, "c": 5}), cfg)
    assert three.by_type_intervals["a"] == two.by_type_intervals["a"]


def test_flat_metrics_log_each_interval_under_its_metric() -> None:
    summary = summarize(_cases({"a": 20, "b": 10}), EvalConfig(bootstrap_resamples=200))
    flat = summary.flat_metrics()
    for prefix, means, bounds in [
        ("", summary.overall, summary.intervals),
        ("by_type/b/", summary.by_type["b"], summary.by_type_intervals["b"]),
        ("by_type_min/", summary.by_type_min, summary.by_type_min_intervals),
    ]:
        for name in means:
            low, high = interval_keys(name)
            assert flat[prefix + name] == means[name]
            assert (flat[prefix + low], flat[prefix + high]) == (
                bounds[name].low,
                bounds[name].high,
            )
    assert interval_keys("recall_at_5") == ("recall_at_5_ci_low", "recall_at_5_ci_high")
