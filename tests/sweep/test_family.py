"""Family-wise control of a sweep's decisions (ragsweep.sweep.family, eval.stats.holm): the
adjusted p-values against Holm written out, the share of a sweep's level an axis gets, and
decisions that use the adjusted p."""

from __future__ import annotations

import random

import pytest

from ragsweep.eval.scoring import CaseResult
from ragsweep.eval.stats import holm
from ragsweep.eval.trace import SpanTrace
from ragsweep.sweep.family import ADJUSTMENTS
from ragsweep.sweep.paired import CaseValues, PairedDifference, paired_difference
from ragsweep.sweep.select import DecisionSettings, decide
from tests.sweep.test_sweep_spec import RECALL, START, STRONG, candidate, values


def holm_rejects(p_values: list[float], alpha: float) -> set[int]:
    """Holm's step-down procedure written out: reject the smallest while p_(i) <= alpha /
    (c - i + 1)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected: set[int] = set()
    for rank, index in enumerate(order):
        if p_values[index] > alpha / (len(p_values) - rank):
            break
        rejected.add(index)
    return rejected


@pytest.mark.parametrize(
    "p_values", [[0.01, 0.04, 0.03, 0.005], [0.2, 0.001, 0.02], [0.5], [0.012, 0.012, 0.3]]
)
def test_holm_adjusted_p_values_reject_what_holm_rejects(p_values: list[float]) -> None:
    adjusted = holm(p_values, 1.0)
    assert all(a >= p for a, p in zip(adjusted, p_values, strict=True))
    for alpha in (0.01, 0.025, 0.05, 0.1):
        assert {i for i, a in enumerate(adjusted) if a <= alpha} == holm_rejects(p_values, alpha)


def test_an_axis_share_scales_the_adjustment() -> None:
    # an axis with 3 of the sweep's 12 values: its level is alpha / 4
    assert holm([0.01, 0.04], 3 / 12) == pytest.approx([0.08, 0.16])
    assert holm([0.3, 0.2], 0.25) == [1.0, 1.0]
    with pytest.raises(ValueError, match="share"):
        holm([0.1], 0.0)


def settings(adjust: str, family_size: int, resamples: int = 10_000) -> DecisionSettings:
    return DecisionSettings(RECALL, "significant", 0.01, 0.05, resamples, 0, adjust, family_size)


def test_decisions_use_the_adjusted_p_value() -> None:
    # 5 of 12 cases found: p = 2/32 = 0.0625 -> not significant; 8 of 12: p = 2/256
    medium = values(*[1.0] * 6, *[0.0] * 6)  # p = 2/64 = 0.03125
    cands = [candidate(START, "start"), candidate(medium, "medium")]
    alone = decide(cands, 0, settings("none", 2), axis_weight=2)
    assert alone.chosen == 1
    # the same axis as one of 4 axes of 2 values: its level is 0.05 / 4
    in_sweep = decide(cands, 0, settings("holm", 8), axis_weight=2)
    assert in_sweep.chosen == 0
    other = in_sweep.paired[1]
    assert isinstance(other, PairedDifference)
    assert other.p_value == pytest.approx(2 / 64)
    assert other.p_adjusted == pytest.approx(2 / 64 * 4)
    assert other.to_dict()["p_adjusted"] == other.p_adjusted
    assert (other.to_dict()["gained"], other.to_dict()["lost"]) == (6, 0)
    assert in_sweep.distinguishable is False
    strong = decide([cands[0], candidate(STRONG, "strong")], 0, settings("holm", 8), 2)
    assert strong.chosen == 1  # p = 2/256, adjusted 0.031


def test_the_family_wise_error_under_the_null_is_at_most_alpha() -> None:
    # 4 axes of 3 values, every value equal in distribution: per case, the challenger's
    # difference is +1 or -1 at random on 30 of 40 cases; count sweeps adopting anything
    rng = random.Random(5)
    adopted = {"holm": 0, "none": 0}
    sweeps = 150
    for _ in range(sweeps):
        for adjust in adopted:
            any_adopted = False
            for _axis in range(4):
                cands = [candidate(values(*[0.5] * 40), "start")]
                for name in ("a", "b"):
                    cases = [0.5 + rng.choice((0.5, -0.5)) if i < 30 else 0.5 for i in range(40)]
                    cands.append(candidate(values(*cases), name))
                decision = decide(cands, 0, settings(adjust, 12, 400), axis_weight=3)
                any_adopted |= decision.chosen != 0
            adopted[adjust] += any_adopted
    assert adopted["holm"] / sweeps <= 0.05 + 0.03
    assert adopted["none"] > adopted["holm"]


def test_unknown_adjustments_are_named() -> None:
    with pytest.raises(Exception, match="did you mean 'holm'"):
        ADJUSTMENTS.get("hlm")


def test_a_compared_value_counts_its_lost_hits_by_stage() -> None:
    def result(case_id: str, hit: float, spans: list[tuple[int | None, int | None]]) -> CaseResult:
        metrics = {"recall_at_2000c": hit, "hit_at_2000c": hit, "chunks_used_at_2000c": 3.0}
        traces = tuple(SpanTrace(*s) for s in spans)
        return CaseResult(case_id, "factual", "tuning", True, metrics, (), 0.0, traces)

    chosen = [result("a", 1, [(1, 80)]), result("b", 1, [(2, 80)]), result("c", 0, [(9, 80)])]
    other = [result("a", 0, [(None, None)]), result("b", 0, [(7, 80)]), result("c", 1, [(1, 80)])]
    mine, theirs = (CaseValues.from_cases(r, "recall_at_2000c", "x") for r in (other, chosen))
    paired = paired_difference(mine, theirs, 100, 0, 0.95)
    assert isinstance(paired, PairedDifference)
    # a: split in the other value; b: its chunk fell from rank 2 to 7; c was gained
    assert paired.lost_by_stage == {"chunking": 1, "ranking": 1}
    assert paired.to_dict()["lost_by_stage"] == {"chunking": 1, "ranking": 1}
