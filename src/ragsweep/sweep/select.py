"""How an axis' value is chosen: pure functions over the objectives and per-case values of
its points.

The value to beat (the *reference*) is the incumbent, i.e. the best configuration carried
forward from the previous axes (for the first axis: the baseline), when it has an objective;
otherwise the first value in file order that has one. A value that leaked (``acl_leaks`` > 0)
is never the reference, never chosen and never the runner-up; when the incumbent leaked, the
reference is the best clean value. A challenger may replace the reference
only if it beats it by more than ``min_improvement`` and the sweep's *decision rule*
(:data:`DECISIONS`, the sweep file's ``decision``) admits it; among admitted challengers the
best wins, and an exact tie goes to the one listed first.

- ``best``: every challenger that beats the reference by more than ``min_improvement``.
- ``significant``: only if, in addition, the paired randomization test of challenger minus
  reference on the same cases rejects "no difference" at ``alpha`` (two-sided) after the
  sweep's family-wise adjustment (:mod:`ragsweep.sweep.family`: ``p_adjusted <= alpha``,
  adjusted over the axis' comparisons with the reference); a challenger whose per-case
  values are unavailable is not admitted.

Once chosen, every other value is compared with the chosen one on the same cases, and those
p-values are adjusted the same way. The *runner-up* is the best other configuration; a
decision is *distinguishable* when the runner-up's adjusted p against the chosen value is
at most ``alpha``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from ragsweep.core.errors import RagsweepError
from ragsweep.core.registry import Registry
from ragsweep.eval.measures import Measure
from ragsweep.sweep.family import ADJUSTMENTS, DEFAULT_ADJUSTMENT
from ragsweep.sweep.paired import CaseValues, Paired, PairedDifference, Unpaired, paired_difference

# Objectives are means of per-question scores: differences below this are float noise.
TOLERANCE = 1e-9

BEST = "best"
SIGNIFICANT = "significant"
DEFAULT_ALPHA = 0.05
DEFAULT_RESAMPLES = 10_000


class NoObjectiveError(RagsweepError):
    """Every value of an axis failed or was invalid, so there is nothing to choose."""


class LeakingAxisError(NoObjectiveError):
    """Every value of an axis that has an objective leaked (``acl_leaks`` > 0): a sweep
    never adopts a configuration that retrieved what its principal may not read."""


@dataclass(frozen=True)
class DecisionRule:
    """A way of choosing. ``admits(paired, alpha)`` says whether a challenger that beats the
    reference by more than ``min_improvement`` may replace it, given its paired comparison
    with the reference (None when the rule does not ``use_paired``)."""

    summary: str
    use_paired: bool
    admits: Callable[[Paired | None, float], bool]


def _significant(paired: Paired | None, alpha: float) -> bool:
    return isinstance(paired, PairedDifference) and paired.p_decisive <= alpha


DECISIONS: Registry[DecisionRule] = Registry("sweep.decision")
DECISIONS.add(
    BEST,
    DecisionRule(
        "the best value if it beats the current one by more than min_improvement",
        use_paired=False,
        admits=lambda paired, alpha: True,
    ),
)
DECISIONS.add(
    SIGNIFICANT,
    DecisionRule(
        "as best, and only when the paired test against the current one rejects at alpha "
        "(adjusted p-value)",
        use_paired=True,
        admits=_significant,
    ),
)


@dataclass(frozen=True)
class DecisionSettings:
    """The sweep file's choice settings: ``min_improvement`` absolute, in the objective's
    units; ``alpha`` the two-sided significance level of the paired test (its interval's
    coverage is ``1 − alpha``); ``resamples`` and ``seed`` of the paired test; ``adjust``
    names the family-wise adjustment (:data:`ragsweep.sweep.family.ADJUSTMENTS`) over the
    sweep's ``family_size`` values."""

    measure: Measure
    decision: str = BEST
    min_improvement: float = 0.0
    alpha: float = DEFAULT_ALPHA
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    adjust: str = DEFAULT_ADJUSTMENT
    family_size: int = 1

    @property
    def level(self) -> float:
        """Coverage of the interval beside every paired difference: ``1 − alpha``, so an
        interval excludes 0 exactly when the unadjusted p is at most ``alpha``."""
        return 1.0 - self.alpha


@dataclass(frozen=True)
class Candidate:
    """What a decision sees of one value of an axis: its objective (None: failed or
    invalid), its config hash, its per-case objective values (or why there are none), its
    ``acl_leaks`` (None: unknown; default: its cases') and whether the corpus has access
    metadata (``access``)."""

    objective: float | None
    config_hash: str | None
    cases: CaseValues | Unpaired | None
    leaks: float | None = None
    access: bool = False

    @property
    def leaked(self) -> bool:
        """Whether it may not be adopted: it retrieved chunks its cases' principals may not
        read, or, on a corpus with access metadata, whether it did is unknown."""
        leaks = self.leaks
        if leaks is None and isinstance(self.cases, CaseValues):
            leaks = self.cases.leaks
        if leaks is None:
            return self.access and self.objective is not None
        return leaks > 0


@dataclass(frozen=True)
class AxisDecision:
    """The outcome of :func:`decide`, by index into the candidates. ``paired[i]`` compares
    candidate i with the chosen one (None for the chosen one and for candidates without an
    objective); ``distinguishable`` is None without a runner-up or its paired test."""

    chosen: int
    reference: int
    paired: tuple[Paired | None, ...]
    runner_up: int | None
    distinguishable: bool | None


def reference_index(objectives: Sequence[float | None], incumbent: int | None) -> int:
    """Index of the value to beat (see module docstring); ``None`` objectives did not run."""
    if incumbent is not None and objectives[incumbent] is not None:
        return incumbent
    for index, value in enumerate(objectives):
        if value is not None:
            return index
    raise NoObjectiveError("no value of the axis produced an objective")


def best_index(objectives: Sequence[float | None], measure: Measure) -> int:
    """Index of the best objective in ``measure``'s direction, the first listed on a tie
    (``None`` objectives did not run or leaked)."""
    best: int | None = None
    for index, value in enumerate(objectives):
        best_value = None if best is None else objectives[best]
        if value is not None and (
            best_value is None or measure.gain(value, best_value) > TOLERANCE
        ):
            best = index
    if best is None:
        raise NoObjectiveError("no value of the axis produced an objective")
    return best


def choose(
    objectives: Sequence[float | None],
    reference: int,
    measure: Measure,
    min_improvement: float,
    admits: Callable[[int], bool] = lambda index: True,
) -> int:
    """Index of the chosen value: the reference unless a challenger wins by more than
    ``min_improvement`` (absolute, in the objective's units) in ``measure``'s direction and
    ``admits(index)``; among such challengers the best, the first listed on a tie."""
    gain = measure.gain
    reference_value = objectives[reference]
    if reference_value is None:
        raise ValueError("the reference must have an objective")
    best, best_value = reference, reference_value
    for index, value in enumerate(objectives):
        if value is None or index == reference:
            continue
        wins = gain(value, reference_value) > min_improvement + TOLERANCE
        if wins and gain(value, best_value) > TOLERANCE and admits(index):
            best, best_value = index, value
    return best


def decide(
    candidates: Sequence[Candidate],
    incumbent: int | None,
    settings: DecisionSettings,
    axis_weight: int | None = None,
) -> AxisDecision:
    """Choose among ``candidates`` (``incumbent``: the index of the axis' start, if among
    them) and compare every other candidate with the chosen one (module docstring);
    ``axis_weight``: the axis' values counted in the sweep's family (default: the
    candidates)."""
    objectives = [c.objective for c in candidates]
    clean = _without_leaks(candidates)
    if incumbent is not None and candidates[incumbent].leaked:
        reference = best_index(clean, settings.measure)
    else:
        reference = reference_index(clean, incumbent)
    rule = DECISIONS.get(settings.decision)
    share = min(1.0, (axis_weight or len(candidates)) / max(settings.family_size, 1))
    compare = _comparer(candidates, settings)
    against_reference = _adjusted(candidates, reference, compare, settings.adjust, share)

    def admits(index: int) -> bool:
        if candidates[index].leaked:
            return False
        return rule.admits(against_reference[index] if rule.use_paired else None, settings.alpha)

    chosen = choose(objectives, reference, settings.measure, settings.min_improvement, admits)
    paired = _adjusted(candidates, chosen, compare, settings.adjust, share)
    runner_up = _runner_up(candidates, chosen, settings.measure)
    distinguishable = None
    if runner_up is not None and isinstance(paired[runner_up], PairedDifference):
        distinguishable = _significant(paired[runner_up], settings.alpha)
    return AxisDecision(chosen, reference, paired, runner_up, distinguishable)


def _without_leaks(candidates: Sequence[Candidate]) -> list[float | None]:
    """The objectives, None for every candidate that leaked: a leak is never the value to
    beat nor chosen, whatever its objective."""
    objectives = [None if c.leaked else c.objective for c in candidates]
    if all(v is None for v in objectives) and any(c.objective is not None for c in candidates):
        raise LeakingAxisError(
            "every value that ran retrieved chunks its cases' principals may not read "
            "(acl_leaks > 0), and a sweep never adopts a leak: use retrieval.acl=pre or post"
        )
    return objectives


def _adjusted(
    candidates: Sequence[Candidate],
    against: int,
    compare: Callable[[int, int], Paired],
    adjust: str,
    share: float,
) -> tuple[Paired | None, ...]:
    """Every candidate with an objective compared with candidate ``against`` (None for it
    and for candidates without one), the p-values adjusted together."""
    paired = [
        None if c.objective is None or i == against else compare(i, against)
        for i, c in enumerate(candidates)
    ]
    tested = [i for i, p in enumerate(paired) if isinstance(p, PairedDifference)]
    p_values = [p.p_value for p in paired if isinstance(p, PairedDifference)]
    for index, p_adjusted in zip(
        tested, ADJUSTMENTS.get(adjust).adjust(p_values, share), strict=True
    ):
        difference = paired[index]
        assert isinstance(difference, PairedDifference)
        paired[index] = difference.adjusted(p_adjusted)
    return tuple(paired)


def _comparer(
    candidates: Sequence[Candidate], settings: DecisionSettings
) -> Callable[[int, int], Paired]:
    """``compare(i, j)``: candidate i minus candidate j on the same cases (memoized)."""

    @cache
    def compare(index: int, against: int) -> Paired:
        mine, theirs = candidates[index].cases, candidates[against].cases
        for values in (mine, theirs):
            if isinstance(values, Unpaired):
                return values
            if values is None:
                return Unpaired("no objective")
        assert isinstance(mine, CaseValues) and isinstance(theirs, CaseValues)
        return paired_difference(mine, theirs, settings.resamples, settings.seed, settings.level)

    return compare


def _runner_up(candidates: Sequence[Candidate], chosen: int, measure: Measure) -> int | None:
    """The best candidate with an objective, no leak and another configuration than the
    chosen one (the first listed on a tie)."""
    best: int | None = None
    for index, candidate in enumerate(candidates):
        value = candidate.objective
        if value is None or candidate.leaked:
            continue
        if candidate.config_hash == candidates[chosen].config_hash:
            continue
        best_value = None if best is None else candidates[best].objective
        if best_value is None or measure.gain(value, best_value) > TOLERANCE:
            best = index
    return best
