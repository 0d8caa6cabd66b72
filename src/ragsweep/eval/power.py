"""How small a difference a golden set can detect: planning figures for paired comparisons.

Two configurations scored on the same ``n`` answerable cases are compared by the mean of the
per-case differences of a metric in [0, 1] (``ragsweep-compare``: a two-sided paired
randomization test). For a 0/1 metric such as ``hit_at_5`` a case's difference is -1, 0 or
+1, and it is non-zero on the *discordant* cases, those that one configuration hits and the
other misses. If a share ``q`` of cases is discordant, the differences have variance
``q - delta**2``, about ``q`` for a small effect ``delta``. With the normal approximation to
the test and a continuity correction (the differences are whole cases, so the mean moves in
steps of 1 / n), the smallest mean difference detected with probability ``power`` at level
``alpha`` is

    mde = (z(1 - alpha / 2) + z(power)) * sqrt(q / n) + 1 / n

(2.80 * sqrt(q / n) + 1 / n at alpha = 0.05 and power = 0.8). Simulated with
ragsweep-compare's own test (tests/data/test_golden_stats.py), a difference of ``mde`` is detected
in about 80% of trials at a few hundred cases and more often on small sets, where the
figure is conservative. Without the correction the exact test reaches only ~77%.
Independently of any approximation, the
randomization test cannot reject at all when too few cases are discordant: with ``m``
discordant cases its smallest two-sided p-value is ``2 / 2**m``, so it needs
``m >= min_discordant(alpha)`` (6 at alpha = 0.05), i.e. ``n >= 6 / q`` cases.

``q`` is an assumption about the configurations compared, not a property of the golden set:
near-identical configurations disagree on few cases (small ``q``, smaller ``mde`` but also
fewer discordant cases), different chunkings on more. Metrics that are not 0/1 (recall over
several spans, nDCG, coverage) have per-case differences of at most 1 in size, so ``q`` then
stands for the mean squared difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class PowerAssumptions:
    """``alpha``: two-sided significance level; ``power``: probability of detecting the
    difference; ``discordance``: the share ``q`` of cases on which the two configurations
    compared disagree (module docstring)."""

    alpha: float = 0.05
    power: float = 0.8
    discordance: float = 0.2

    def __post_init__(self) -> None:
        for name in ("alpha", "power", "discordance"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise ValueError(f"{name}={value} must be in (0, 1)")

    def describe(self) -> str:
        """The assumptions in one sentence, for the command's output."""
        return (
            f"two-sided paired test at alpha = {self.alpha}, power {self.power:.0%}, the two "
            f"configurations disagreeing on {self.discordance:.0%} of cases (normal "
            "approximation; see ragsweep.eval.power)"
        )


def min_discordant(alpha: float) -> int:
    """The fewest discordant cases with which a two-sided sign-flip test can reach
    p <= ``alpha`` (its smallest p-value with ``m`` of them is ``2 / 2**m``)."""
    m = 1
    while 2.0 / 2**m > alpha:
        m += 1
    return m


def detectable_difference(n_cases: int, assumptions: PowerAssumptions) -> float | None:
    """The smallest paired mean difference detectable on ``n_cases`` answerable cases (in the
    metric's units), or None when none is: fewer expected discordant cases than
    :func:`min_discordant`, or a difference that would exceed 1."""
    a = assumptions
    if n_cases < 1 or a.discordance * n_cases < min_discordant(a.alpha):
        return None
    z = NormalDist().inv_cdf
    mde = (z(1 - a.alpha / 2) + z(a.power)) * math.sqrt(a.discordance / n_cases) + 1 / n_cases
    return mde if mde <= 1.0 else None


def power_remark(
    n_cases: int, difference: float | None, assumptions: PowerAssumptions | None = None
) -> str | None:
    """One sentence when a paired test on ``n_cases`` answerable cases could not have
    detected ``difference`` (None: any difference), else None: either no difference is
    detectable at all, or ``difference`` is smaller than :func:`detectable_difference`.
    Said where a decision is taken (promotion, compare, ``ragsweep check``), so that an
    INCONCLUSIVE verdict is read as "this set is too small", not as "no difference"."""
    a = assumptions or PowerAssumptions()
    mde = detectable_difference(n_cases, a)
    if mde is None:
        return (
            f"{n_cases} answerable cases can detect no difference (a paired test needs at "
            f"least {min_discordant(a.alpha)} cases that change; with "
            f"{a.discordance:.0%} of cases changing that takes "
            f"{math.ceil(min_discordant(a.alpha) / a.discordance)} cases): a verdict here can "
            "only be INCONCLUSIVE; add cases (ragsweep-golden stats)"
        )
    if difference is not None and abs(difference) < mde:
        return (
            f"a difference of {abs(difference):.3f} is below the {mde:.3f} that "
            f"{n_cases} answerable cases detect with {a.power:.0%} power at alpha {a.alpha:g} "
            "(ragsweep-golden stats): INCONCLUSIVE is the expected verdict, not evidence of "
            "no difference"
        )
    return None
