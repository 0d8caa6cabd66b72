"""Family-wise control of a sweep's decisions: the adjusted p-value of every comparison.

A sweep decides axis after axis, each decision on top of the previous ones, so the p-values
of later axes are not known when an earlier axis is decided, and a plain Holm procedure over
the whole sweep cannot be run. ragsweep uses its sequential equivalent: the sweep's level
``alpha`` is split over its axes in proportion to their number of values (a weighted
Bonferroni split, fixed before any job from the sweep file alone), and within an axis the
Holm step-down procedure runs at the axis' share. As adjusted p-values: for an axis with
``h`` of the sweep's ``H`` values (its *share* is ``h / H``), whose ``c`` comparisons have
p-values ``p_(1) <= ... <= p_(c)``,

    p_adjusted_(i) = min(1, max_{l <= i} (c − l + 1) · p_(l) · H / h)

and a comparison is significant when ``p_adjusted <= alpha``. Since ``c <= h`` (an axis
compares at most its values with the value to beat), the chance that *any* value of the
sweep is admitted when no configuration truly differs from another (the family-wise error
rate under the global null) is at most ``alpha``, whatever the dependence between the
comparisons: the union bound over axes, and Holm within each. It is at least as powerful as
Bonferroni over all ``H`` values. What it does not control: the choice among several values
that all truly differ (the best is taken by its mean), nor errors of a configuration that
is better on these cases but not on others (the golden set's coverage).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragsweep.core.registry import Registry
from ragsweep.eval.stats import holm

HOLM = "holm"
NO_ADJUSTMENT = "none"
DEFAULT_ADJUSTMENT = HOLM


@dataclass(frozen=True)
class Adjustment:
    """A way of adjusting one axis' p-values: ``adjust(p_values, share)`` with ``share`` the
    axis' part of the sweep's family (``h / H``)."""

    summary: str
    adjust: Callable[[Sequence[float], float], list[float]]


ADJUSTMENTS: Registry[Adjustment] = Registry("sweep.adjust")
ADJUSTMENTS.add(
    HOLM,
    Adjustment(
        "Holm within each axis at the axis' share of alpha: the chance of adopting any value "
        "on noise across the sweep is at most alpha",
        holm,
    ),
)
ADJUSTMENTS.add(
    NO_ADJUSTMENT,
    Adjustment(
        "each comparison at alpha on its own (the chance of adopting some value on noise "
        "grows with every value)",
        lambda p_values, share: list(p_values),
    ),
)
