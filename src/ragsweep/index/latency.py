"""Per-stage query latency: how long each stage of a ranking took per query.

A ranking made in several stages (a hybrid's ``sparse``, ``dense`` and ``fusion``, a
reranker's ``rerank``) records each stage's seconds per query (:attr:`Ranked.stages`);
a run reports their p50 and p95 in milliseconds beside the total (``latency_ms_p50``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragsweep.index.base import Ranked

PERCENTILES = (50, 95)


def stage_latency(ranked: Sequence[Ranked]) -> dict[str, float]:
    """``latency_ms_p50/<stage>`` and ``latency_ms_p95/<stage>``: percentiles over the
    queries of each stage's time in milliseconds; empty when rankings have no stages."""
    if not ranked or not ranked[0].stages:
        return {}
    names = [name for name, _ in ranked[0].stages]
    table = np.array([[seconds for _, seconds in r.stages] for r in ranked]) * 1000.0
    return {
        f"latency_ms_p{p}/{name}": float(np.percentile(table[:, column], p))
        for column, name in enumerate(names)
        for p in PERCENTILES
    }
