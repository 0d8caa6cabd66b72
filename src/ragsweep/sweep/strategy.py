"""Search strategies of a sweep file (``strategy``): how many passes over the axes a sweep
may make, and whether a search follows them.

``one_axis`` (the default) makes one pass: every axis once, in file order, each on top of
the values chosen before it. ``confirm`` repeats whole passes on top of the current choice
until a pass changes nothing, at most ``max_passes`` (the first included): a later axis'
choice can change the best value of an earlier one (a chunk size that favours another split
mode), which one pass never revisits. A value evaluated in an earlier pass is not launched
again (its configuration is reused), so a pass that changes nothing costs only the
configurations it has not seen. ``optuna`` makes the one pass, then ``trials`` trials of a
seeded TPE search over every axis at once (:mod:`ragsweep.sweep.search`); the search's best
replaces the pass's winner only when the paired test says it is better.

The family-wise adjustment counts every comparison a sweep may make
(:attr:`ragsweep.sweep.spec.SweepSpec.family_size`): for ``confirm``, every value of every
axis once per allowed pass; for ``optuna``, one more (the search's best against the pass's
winner).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ragsweep.core.registry import Registry

ONE_AXIS = "one_axis"
CONFIRM = "confirm"
OPTUNA = "optuna"
DEFAULT_STRATEGY = ONE_AXIS
DEFAULT_MAX_PASSES = 3
DEFAULT_TRIALS = 20


@dataclass(frozen=True)
class Strategy:
    """A search strategy: ``passes(max_passes)`` is the most passes over the axes it makes;
    ``searches``: whether a search over every axis at once follows the passes (its trials
    are the sweep file's ``trials``; its best is compared once with the passes' winner)."""

    summary: str
    passes: Callable[[int], int]
    searches: bool = False


STRATEGIES: Registry[Strategy] = Registry("sweep.strategy")
STRATEGIES.add(
    ONE_AXIS,
    Strategy(
        "one pass over the axes, each decided on top of the values chosen before it",
        lambda max_passes: 1,
    ),
)
STRATEGIES.add(
    CONFIRM,
    Strategy(
        "passes over all axes on top of the current choice until a whole pass changes "
        "nothing (at most max_passes)",
        lambda max_passes: max_passes,
    ),
)
STRATEGIES.add(
    OPTUNA,
    Strategy(
        "one pass, then a seeded TPE search (Optuna) over every axis at once for `trials` "
        "trials; its best is adopted only when significantly better than the pass's winner",
        lambda max_passes: 1,
        searches=True,
    ),
)
