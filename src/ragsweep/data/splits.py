"""Split assignment: which split (tuning or holdout) a golden case without one belongs to.

The split names themselves are :data:`ragsweep.core.names.SPLITS`.
"""

from __future__ import annotations

import hashlib

from ragsweep.core.names import HOLDOUT, TUNING


def assign_split(case_id: str, holdout_fraction: float) -> str:
    """Deterministic split for a case without one: ``holdout`` for about ``holdout_fraction``
    of ids, chosen by the first 64 bits of sha256(id), so the same on every machine and run."""
    if not 0.0 <= holdout_fraction <= 1.0:
        raise ValueError(f"holdout_fraction={holdout_fraction} must be in [0, 1]")
    position = int(hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:16], 16) / 2**64
    return HOLDOUT if position < holdout_fraction else TUNING
