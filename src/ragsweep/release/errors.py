"""Errors of the release tools; each names the run, tag, key or file concerned."""

from __future__ import annotations

from ragsweep.core.errors import RagsweepError

EMPTY_RUN_ID = (
    "an empty run id names no run (is the variable holding it unset?); pass a run id: "
    "only --best and --latest, where a command has them, ask for the newest run"
)
"""Every tool that takes a run id refuses an empty one with this: only ``--best`` and
``--latest`` ask for the newest run."""


class RunLookupError(RagsweepError):
    """A run that does not exist, is incomplete, or lacks a tag or artifact a tool needs."""


class PromotionError(RagsweepError):
    """A run that cannot be promoted (wrong split, other corpus or golden set...)."""


class ComparisonError(RagsweepError):
    """Two runs that cannot be compared case by case (different data, no shared cases)."""


class ThresholdsError(RagsweepError):
    """An invalid thresholds file or a ratchet that cannot be applied."""


class EvalLogError(RagsweepError):
    """An ``eval_logs`` day file that cannot be read."""
