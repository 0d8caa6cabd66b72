"""How an axis' value is chosen: pure functions over the objectives of its points.

The value to beat (the *reference*) is the incumbent, i.e. the best configuration carried
forward from the previous axes (for the first axis: the baseline), when it has an objective;
otherwise the first value in file order that has one. A challenger replaces the reference
only if it beats it by more than ``min_improvement``; among such challengers the best wins,
and an exact tie goes to the one listed first.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragsweep.errors import RagsweepError
from ragsweep.measures import Measure

# Objectives are means of per-question scores: differences below this are float noise.
TOLERANCE = 1e-9


class NoObjectiveError(RagsweepError):
    """Every value of an axis failed or was invalid, so there is nothing to choose."""


def reference_index(objectives: Sequence[float | None], incumbent: int | None) -> int:
    """Index of the value to beat (see module docstring); ``None`` objectives did not run."""
    if incumbent is not None and objectives[incumbent] is not None:
        return incumbent
    for index, value in enumerate(objectives):
        if value is not None:
            return index
    raise NoObjectiveError("no value of the axis produced an objective")


def choose(
    objectives: Sequence[float | None],
    reference: int,
    measure: Measure,
    min_improvement: float,
) -> int:
    """Index of the chosen value: the reference unless a challenger wins by more than
    ``min_improvement`` (absolute, in the objective's units) in ``measure``'s direction."""
    gain = measure.gain
    reference_value = objectives[reference]
    if reference_value is None:
        raise ValueError("the reference must have an objective")
    best, best_value = reference, reference_value
    for index, value in enumerate(objectives):
        if value is None or index == reference:
            continue
        wins = gain(value, reference_value) > min_improvement + TOLERANCE
        if wins and gain(value, best_value) > TOLERANCE:
            best, best_value = index, value
    return best
