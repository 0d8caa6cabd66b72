"""Bootstrap intervals: the resampling machinery, its statistics, and the run summary."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragsweep.config.schema import EvalConfig
from ragsweep.eval.scoring import CaseResult, summarize
from ragsweep.eval.uncertainty import (
    Bootstrap,
    interval_keys,
    resample_counts,
    resampled_sums,
    stratified_intervals,
)


def test_resample_counts_draw_n_cases_per_resample() -> None:
    counts = resample_counts(50, 200, np.random.default_rng(1))
    assert counts.shape == (200, 50)
    assert (counts.sum(axis=1) == 50).all()
    assert counts.min() == 0 and counts.max() > 1  # with replacement


def test_resampled_sums_are_sums_of_the_drawn_cases() -> None:
    values = np.random.default_rng(0).random((37, 3))
    draws = np.random.default_rng(4).integers(0, 37, size=(300, 37))
    plain = np.stack([values[row].sum(axis=0) for row in draws])
    ours = resampled_sums(values, 300, np.random.default_rng(4))
    assert ours == pytest.approx(plain, abs=1e-12)


def test_many_resamples_are_drawn_in_parts() -> None:
    values = np.arange(5000, dtype=float)[:, None] % 2
    sums = resampled_sums(values, 2000, np.random.default_rng(0))  # 3 parts of <= 838 rows
    assert sums.shape == (2000, 1)
    assert len(np.unique(sums[:800])) > 50 and len(np.unique(sums[-800:])) > 50
    assert not np.array_equal(sums[:800], sums[1000:1800])


def one_stratum(rows: list[dict[str, float]], bootstrap: Bootstrap) -> dict[str, object]:
    return stratified_intervals({"all": rows}, list(rows[0]), bootstrap).overall  # type: ignore[return-value]


def test_interval_of_a_proportion_matches_the_normal_approximation() -> None:
    rows = [{"hit_at_1": float(i % 2)} for i in range(400)]
    bounds = one_stratum(rows, Bootstrap(resamples=4000, seed=0))["hit_at_1"]
    half_width = 1.959964 * math.sqrt(0.5 * 0.5 / 400)
    assert bounds.low == pytest.approx(0.5 - half_width, abs=0.01)  # type: ignore[attr-defined]
    assert bounds.high == pytest.approx(0.5 + half_width, abs=0.01)  # type: ignore[attr-defined]


def test_a_constant_metric_and_a_single_case_have_point_intervals() -> None:
    constant = one_stratum([{"m": 0.25}] * 30, Bootstrap(100, 0))["m"]
    assert (constant.low, constant.high) == (0.25, 0.25)  # type: ignore[attr-defined]
    single = one_stratum([{"m": 0.7}], Bootstrap(100, 0))["m"]
    assert (single.low, single.high) == pytest.approx((0.7, 0.7))  # type: ignore[attr-defined]


def test_the_seed_decides_the_interval() -> None:
    rows = [{"m": float(i % 3 == 0)} for i in range(60)]
    first = one_stratum(rows, Bootstrap(500, 1))
    assert one_stratum(rows, Bootstrap(500, 1)) == first
    assert one_stratum(rows, Bootstrap(500, 2)) != first


def test_resampling_within_types_keeps_the_type_mix() -> None:
    # type a always hits, type b never does: any resample keeps 30 of a and 10 of b, so the
    # overall mean cannot move; resampling across types would move it
    strata = {"a": [{"m": 1.0}] * 30, "b": [{"m": 0.0}] * 10}
    bounds = stratified_intervals(strata, ["m"], Bootstrap(500, 0))
    assert (bounds.overall["m"].low, bounds.overall["m"].high) == (0.75, 0.75)


def test_rejects_no_resamples_and_no_cases() -> None:
    with pytest.raises(ValueError, match="resamples=0"):
        Bootstrap(0, 0)
    with pytest.raises(ValueError, match="at least one case"):
        resampled_sums(np.zeros((0, 2)), 10, np.random.default_rng(0))


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
    # on every resample the minimum is at most each type's mean
    summary = summarize(_cases({"a": 30, "b": 9, "c": 15}), EvalConfig(bootstrap_resamples=500))
    for name, bounds in summary.by_type_min_intervals.items():
        for per_type in summary.by_type_intervals.values():
            assert bounds.low <= per_type[name].low
            assert bounds.high <= per_type[name].high


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
