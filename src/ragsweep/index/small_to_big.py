"""Small-to-big retrieval: rankings of small chunks turned into rankings of their parents.

With ``retrieval.parent`` other than ``none`` the index ranks the run's chunks as usual
(the cached rankings are those of the chunks, so their key does not hold the parent
fields); then each ranked chunk is replaced by its parent
(:mod:`ragsweep.chunk.parents`) and a parent already handed back at a better rank is
dropped, so each ranking holds distinct parents in the order their best chunk was ranked,
with that chunk's score. Scoring, the context budgets included, reads the parents: a
parent costs its own length (docs/retrieval.md, "Small-to-big retrieval").
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ragsweep.chunk import chunkers as chunkers_module
from ragsweep.chunk import parents as parents_module
from ragsweep.chunk.chunkers import Chunk
from ragsweep.chunk.parents import PARENTS, WINDOW, parent_chunks
from ragsweep.chunk.table import take_rows
from ragsweep.config.schema import RetrievalConfig
from ragsweep.core.hashing import sha256_json, source_digest
from ragsweep.data import spans as spans_module
from ragsweep.data.corpus import Corpus
from ragsweep.index.base import Ranked


def uses_parents(cfg: RetrievalConfig) -> bool:
    """Whether ``retrieval.parent`` hands back parents rather than the chunks."""
    return PARENTS.get(cfg.parent) is not None


def parent_line(cfg: RetrievalConfig) -> str:
    """``section`` or ``window of 1000 chars``: the parent as a run's summary shows it."""
    if cfg.parent == WINDOW:
        return f"window of {cfg.parent_chars} chars, duplicates collapsed"
    return f"{cfg.parent}, duplicates collapsed"


def parents_set(chunk_set: str, cfg: RetrievalConfig) -> str:
    """The identity of the parents handed back for the chunks of ``chunk_set`` (what a
    scored result's key names as its chunk set, :func:`~ragsweep.run.scored.scores_key`):
    the chunk set, the parent fields and the code that finds parents."""
    fields = {"parent": cfg.parent, "parent_chars": cfg.parent_chars}
    return sha256_json({"chunks": chunk_set, "parents": fields, "code": _parents_code()})


@functools.cache
def _parents_code() -> str:
    # parents are cut by chunkers' section finding and spans' trimming too: for a backend
    # bringing its own chunks, the chunk set does not cover that code
    return source_digest(parents_module, chunkers_module, spans_module, sys.modules[__name__])


def parent_rankings(
    ranked: Sequence[Ranked], chunks: Sequence[Chunk], corpus: Corpus, cfg: RetrievalConfig
) -> tuple[list[Chunk], list[Ranked]]:
    """The distinct parents of the chunks ``ranked`` holds, and the rankings with indices
    into them (module docstring): duplicates collapsed in rank order."""
    rows = np.unique(np.concatenate([r.indices for r in ranked] or [np.empty(0, np.int64)]))
    children = take_rows(chunks, rows.tolist())
    parents: list[Chunk] = []
    position: dict[str, int] = {}
    parent_of_row: dict[int, int] = {}
    for row, parent in zip(
        rows.tolist(), parent_chunks(corpus, children, cfg.parent, cfg.parent_chars), strict=True
    ):
        parent_of_row[row] = position.setdefault(parent.id, len(parents))
        if parent_of_row[row] == len(parents):
            parents.append(parent)
    return parents, [_collapsed(r, parent_of_row) for r in ranked]


def _collapsed(ranking: Ranked, parent_of_row: dict[int, int]) -> Ranked:
    """``ranking`` over parents: each parent once, at the rank of its best chunk."""
    seen: set[int] = set()
    keep: list[int] = []
    indices: list[int] = []
    for rank, row in enumerate(ranking.indices.tolist()):
        parent = parent_of_row[row]
        if parent not in seen:
            seen.add(parent)
            keep.append(rank)
            indices.append(parent)
    return replace(
        ranking,
        indices=np.asarray(indices, dtype=np.int64),
        scores=ranking.scores[np.asarray(keep, dtype=np.int64)],
    )
