"""Fusing two rankings of one query into one (hybrid retrieval, docs/retrieval.md).

Each fusion maps the two component rankings (``sparse`` and ``dense``, each best first)
to a fused score per chunk; chunks are then ordered by fused score, ties by chunk index.
A chunk absent from one component's ranking gets nothing from that component.

- ``rrf``: weighted reciprocal rank fusion,
  ``(1 - alpha) / (rrf_k + rank_sparse) + alpha / (rrf_k + rank_dense)``, ranks from 1.
  With ``alpha = 0.5`` the order is that of plain RRF (Cormack et al., 2009).
- ``score``: convex combination of min-max normalized scores,
  ``(1 - alpha) * norm(score_sparse) + alpha * norm(score_dense)``, where ``norm`` maps a
  component's scores for this query to [0, 1] (all equal: 1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ragsweep.core.registry import Registry
from ragsweep.index.base import Ranked


@dataclass(frozen=True)
class FusionParams:
    """``alpha``: weight of the dense component in [0, 1]; ``rrf_k``: the RRF rank offset
    (> 0; larger flattens the gap between top ranks)."""

    alpha: float
    rrf_k: float


ComponentWeights = Callable[[Ranked, float, FusionParams], np.ndarray]
"""A component's contribution to each chunk of its ranking, given the component weight."""


def _rrf(ranked: Ranked, weight: float, params: FusionParams) -> np.ndarray:
    ranks = np.arange(1, len(ranked.indices) + 1, dtype=np.float64)
    return weight / (params.rrf_k + ranks)


def _normalized_scores(ranked: Ranked, weight: float, params: FusionParams) -> np.ndarray:
    del params
    scores = np.asarray(ranked.scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    low, high = scores.min(), scores.max()
    if high == low:
        return np.full(scores.shape, weight)
    return weight * (scores - low) / (high - low)


FUSIONS: Registry[ComponentWeights] = Registry("embedding.options.fusion")
FUSIONS.add("rrf", _rrf)
FUSIONS.add("score", _normalized_scores)


def fuse(
    sparse: Ranked, dense: Ranked, fusion: str, params: FusionParams, top_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``top_k`` chunk indices of the fused ranking and their fused scores."""
    weights = FUSIONS.get(fusion)
    indices = np.concatenate([sparse.indices, dense.indices]).astype(np.int64)
    gains = np.concatenate(
        [weights(sparse, 1.0 - params.alpha, params), weights(dense, params.alpha, params)]
    )
    chunks, inverse = np.unique(indices, return_inverse=True)
    totals = np.zeros(len(chunks), dtype=np.float64)
    np.add.at(totals, inverse, gains)
    order = np.lexsort((chunks, -totals))[:top_k]
    return chunks[order], totals[order].astype(np.float32)
