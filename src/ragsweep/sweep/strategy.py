"""Search strategies of a sweep file (``strategy``): how many passes over the axes a sweep
may make.

``one_axis`` (the default) makes one pass: every axis once, in file order, each on top of
the values chosen before it. ``confirm`` repeats whole passes on top of the current choice
until a pass changes nothing, at most ``max_passes`` (the first included): a later axis'
choice can change the best value of an earlier one (a chunk size that favours another split
mode), which one pass never revisits. A value evaluated in an earlier pass is not launched
again (its configuration is reused), so a pass that changes nothing costs only the
configurations it has not seen.

The family-wise adjustment counts every comparison a sweep may make
(:attr:`ragsweep.sweep.spec.SweepSpec.family_size`): for ``confirm``, every value of every
axis once per allowed pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ragsweep.core.registry import Registry

ONE_AXIS = "one_axis"
CONFIRM = "confirm"
DEFAULT_STRATEGY = ONE_AXIS
DEFAULT_MAX_PASSES = 3


@dataclass(frozen=True)
class Strategy:
    """A search strategy: ``passes(max_passes)`` is the most passes over the axes it makes."""

    summary: str
    passes: Callable[[int], int]


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
