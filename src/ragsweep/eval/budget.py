"""Context budgets: which retrieved chunks fit into a context of a given number of characters.

A generator does not read "the top k chunks"; it reads as much retrieved text as its context
holds. Packing (docs/metrics.md, "Metrics at a context budget") walks a ranking from rank 1:
a chunk's *cost* is the number of its characters not already covered by packed chunks of the
same document (overlap is paid once); it is packed if its cost fits in what is left of the
budget, and the first chunk that does not fit ends the context.

Because packing stops at the first chunk that does not fit, the packed chunks are always a
prefix of the ranking, and because every chunk above that point was packed, the characters
used after packing rank i are the size of the union of the chunks at ranks 1..i. So one
array per batch, the prefix-union lengths (:func:`prefix_union_lengths`), answers every
budget: the context holds the leading chunks whose prefix union is within the budget
(:func:`pack`). The metrics on the packed prefix are in :mod:`ragsweep.eval.metrics`.

Lengths and budgets are in characters (Python code points), as are chunk offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragsweep.core.errors import ConfigError
from ragsweep.eval.relevance import PADDING, IntervalBatch

# Rows scored at once by prefix_union_lengths: bounds its (rows, 2 * depth, depth) arrays.
_BATCH_CELLS = 1 << 22


@dataclass(frozen=True)
class Packing:
    """What one budget packed, for every case of a batch.

    ``n_packed`` (int, ``(n_cases,)``): how many leading chunks of the ranking were packed;
    ``chars`` (int): the characters they hold, overlap counted once (<= ``budget``);
    ``ran_out`` (bool): True when the ranking ended before the budget did, i.e. every
    retrieved chunk was packed and none was refused (the context may hold less than a
    deeper ranking would have given it).
    """

    budget: int
    n_packed: np.ndarray
    chars: np.ndarray
    ran_out: np.ndarray

    def ranks(self, depth: int) -> np.ndarray:
        """Boolean ``(n_cases, depth)``: True at the ranks whose chunk was packed."""
        return np.arange(depth)[None, :] < self.n_packed[:, None]


def prefix_union_lengths(ranked: IntervalBatch) -> np.ndarray:
    """Per case and rank i (0-based), the number of characters in the union of the chunks
    at ranks 1..i+1, taken per document; int64 ``(n_cases, depth)``. Past the end of a
    ranking the value stays at the whole ranking's union."""
    rows = max(1, _BATCH_CELLS // max(1, 2 * ranked.width * ranked.width))
    parts = [
        _prefix_union_rows(_rows(ranked, begin, begin + rows))
        for begin in range(0, ranked.doc.shape[0], rows)
    ]
    return np.concatenate(parts) if parts else np.zeros((0, ranked.width), dtype=np.int64)


def _rows(batch: IntervalBatch, begin: int, end: int) -> IntervalBatch:
    return IntervalBatch(batch.doc[begin:end], batch.start[begin:end], batch.end[begin:end])


def _prefix_union_rows(ranked: IntervalBatch) -> np.ndarray:
    """:func:`prefix_union_lengths` of a few rows.

    Every chunk boundary of a case cuts its documents into elementary segments; each segment
    lies wholly inside or outside each chunk. A segment is paid for by the first rank whose
    chunk contains it, so rank i's cost is the length of the segments first covered at i,
    and the prefix union is the running sum of the costs.
    """
    present = ranked.present
    # sort every boundary of a row by (document, offset); padding sorts last
    doc = np.where(present, ranked.doc, np.iinfo(np.int64).max)
    point_doc = np.concatenate([doc, doc], axis=1)
    point_pos = np.concatenate([ranked.start, ranked.end], axis=1)
    order = np.lexsort((point_pos, point_doc), axis=1)
    point_doc = np.take_along_axis(point_doc, order, 1)
    point_pos = np.take_along_axis(point_pos, order, 1)
    seg_doc, seg_lo, seg_hi = point_doc[:, :-1], point_pos[:, :-1], point_pos[:, 1:]
    real = (seg_doc == point_doc[:, 1:]) & (seg_doc != np.iinfo(np.int64).max)
    inside = (
        (ranked.doc[:, None, :] == seg_doc[:, :, None])
        & (ranked.start[:, None, :] <= seg_lo[:, :, None])
        & (seg_hi[:, :, None] <= ranked.end[:, None, :])
        & real[:, :, None]
        & present[:, None, :]
    )  # (rows, segments, ranks)
    first = inside & (np.cumsum(inside, axis=2) == 1)
    cost = (first * (seg_hi - seg_lo)[:, :, None]).sum(axis=1)
    return np.cumsum(cost, axis=1)


def pack(ranked: IntervalBatch, union: np.ndarray, budget: int) -> Packing:
    """Pack each case's ranking into ``budget`` characters (module docstring).

    ``union`` is ``prefix_union_lengths(ranked)``; rank i is packed exactly when every rank
    above it was and ``union[:, i] <= budget``.
    """
    if budget < 1:
        raise ValueError(f"budget={budget} must be >= 1 character")
    present = ranked.present
    n_packed = ((union <= budget) & present).sum(axis=1)
    rows = np.arange(union.shape[0])
    chars = np.where(n_packed > 0, union[rows, np.maximum(n_packed - 1, 0)], 0)
    ran_out = n_packed == present.sum(axis=1)
    return Packing(budget, n_packed.astype(np.int64), chars.astype(np.int64), ran_out)


def packed_intervals(ranked: IntervalBatch, packing: Packing) -> IntervalBatch:
    """``ranked`` with every chunk that was not packed turned into an empty slot."""
    keep = packing.ranks(ranked.width)
    return IntervalBatch(
        np.where(keep, ranked.doc, PADDING),
        np.where(keep, ranked.start, 0),
        np.where(keep, ranked.end, 0),
    )


# --- how deep a ranking must be ------------------------------------------------------------


def budget_depth(budget: int, size: int, overlap: int) -> int:
    """The smallest ranking depth N at which N full-length fixed-size chunks cannot all fit
    into ``budget`` characters, so that packing them ends with a refused chunk.

    N distinct windows of ``size`` characters placed ``size - overlap`` apart cover at least
    ``N * (size - overlap) + overlap`` characters (per document the union is at least
    ``size + (n - 1) * (size - overlap)``), so N is the smallest integer with
    ``N * (size - overlap) + overlap > budget``. Shorter chunks (a document's last window,
    whitespace trimmed off, paragraph and heading chunks below ``size``) cost less and can
    leave the budget unfilled at this depth; the run records that (``ran_out_at_<B>c``).
    """
    if not 0 <= overlap < size:
        raise ValueError(f"overlap={overlap} must satisfy 0 <= overlap < size={size}")
    return max(1, (budget - overlap) // (size - overlap) + 1)


def retrieval_depth(
    top_k: int | None, ks: tuple[int, ...], budgets: tuple[int, ...], size: int, overlap: int
) -> int:
    """How many chunks a run retrieves per question: ``retrieval.top_k``, or when it is null
    the largest of ``max(eval.ks)`` and :func:`budget_depth` of the largest budget.

    Raises ConfigError, naming both keys, when an explicit ``top_k`` is below either: the
    metrics at a larger k, or at a budget it cannot fill, would silently be computed on
    fewer chunks than they say.
    """
    max_k = max(ks)
    needed = budget_depth(max(budgets), size, overlap) if budgets else 0
    if top_k is None:
        return max(max_k, needed)
    if top_k < max_k:
        raise ConfigError(
            f"retrieval.top_k={top_k} is below the largest of eval.ks={list(ks)}: metrics at "
            f"k > {top_k} would be computed on {top_k} chunks; set retrieval.top_k >= "
            f"{max_k}, or null to derive it"
        )
    if top_k < needed:
        raise ConfigError(
            f"retrieval.top_k={top_k} cannot fill the largest of eval.budgets="
            f"{list(budgets)} ({max(budgets)} characters) with chunking.size={size}, "
            f"chunking.overlap={overlap}: {top_k} chunks of {size} characters fit into it, so "
            f"the budget metrics need retrieval.top_k >= {needed} (N * (size - overlap) + "
            "overlap > budget), or null to derive it"
        )
    return top_k
