"""The reranking stage: a sentence-transformers ``CrossEncoder`` rescores the top
``candidates`` chunks of each query's first-stage ranking (docs/retrieval.md).

``rerank=cross_encoder`` enables it (``rerank=off``, the default, leaves rankings as
searched). The first stage searches ``candidates`` chunks (at least ``top_k``); the
reranker scores each (query, chunk text) pair (the preprocessed question and the chunk's
indexed text, as the index saw them), orders them by its score (ties: first-stage order)
and keeps the best ``top_k``.

Pair scores are content-addressed by reranker identity, query and chunk text
(:class:`~ragsweep.cache.embeddings.EmbeddingStore` rows of ``[score, seconds]``): a sweep over
``candidates`` scores each pair once, and a pair's row keeps the amortized time it took,
so a query's ``rerank`` latency (the sum over its pairs) is the same on a hit.

Needs the extra ``pip install 'ragsweep[st]'``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from ragsweep.cache.embeddings import EmbeddingStore
from ragsweep.cache.stage import StageCache
from ragsweep.config.schema import not_hashed, result_fields
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.core.hashing import canonical_json, sha256_json
from ragsweep.index import st_models
from ragsweep.index.base import Query, Ranked
from ragsweep.index.encoding import ModelIdentity

KEY = "rerank.model"
STAGE = "rerank_scores"


@dataclass(frozen=True)
class RerankConfig:
    """The ``rerank`` config group.

    ``model``: a cross-encoder folder, ``pkg:NAME/FOLDER`` or a cached hub id (see
    :mod:`ragsweep.index.st_models`); ``candidates``: how many first-stage chunks are
    rescored per query; ``max_length``: tokens per (query, chunk) pair (null: the model's
    own). These change rankings. ``batch_size`` (pairs per forward pass), ``device`` and
    ``threads`` (torch CPU threads) do not.
    """

    enabled: bool = False
    model: str = ""
    candidates: int = 20
    max_length: int | None = None
    batch_size: int = not_hashed(32)
    device: str = not_hashed("cpu")
    threads: int = not_hashed(default_factory=lambda: max(1, os.cpu_count() or 1))

    def __post_init__(self) -> None:
        if self.candidates < 1:
            raise ConfigError(f"rerank.candidates={self.candidates} must be >= 1")
        for key in ("batch_size", "threads"):
            if getattr(self, key) < 1:
                raise ConfigError(f"rerank.{key}={getattr(self, key)} must be >= 1")
        if self.max_length is not None and self.max_length < 1:
            raise ConfigError(f"rerank.max_length={self.max_length} must be >= 1")
        if self.enabled and not self.model:
            raise ConfigError("rerank.model must name a cross-encoder when rerank is enabled")

    def depth(self, top_k: int) -> int:
        """How many chunks the first stage searches for a run that keeps ``top_k``."""
        return self.candidates if self.enabled else top_k

    def check_depth(self, top_k: int) -> None:
        """An enabled reranker rescores at least the ``top_k`` chunks a run keeps."""
        if self.enabled and self.candidates < top_k:
            raise ConfigError(
                f"rerank.candidates={self.candidates} must be >= the chunks kept per "
                f"question ({top_k}: retrieval.top_k, or the largest eval.ks)"
            )


def reranker_identity(cfg: RerankConfig) -> ModelIdentity:
    """Name, files digest, ``max_length`` and library versions of the cross-encoder."""
    version = st_models.require_sentence_transformers(KEY)
    folder = st_models.resolve_folder(cfg.model, KEY)
    return ModelIdentity(
        backend="cross_encoder",
        name=st_models.display_name(cfg.model, folder),
        version=version,
        dimension=1,
        normalized=False,
        digest=st_models.folder_digest(folder),
        options={"max_length": cfg.max_length, "runtime": st_models.runtime_versions()},
    )


def hash_part(cfg: RerankConfig, identity: ModelIdentity) -> dict[str, Any]:
    """What the config hash holds of an enabled reranker: its identity for the model, and
    every other result-affecting field."""
    fields = result_fields(cfg)
    del fields["model"]
    return {**fields, "model": identity}


class CrossEncoderScorer:
    """A loaded ``CrossEncoder`` scoring (query, text) pairs; one score per pair."""

    def __init__(self, cfg: RerankConfig) -> None:
        folder = st_models.resolve_folder(cfg.model, KEY)
        self.batch_size = cfg.batch_size
        self._model = st_models.load_offline("CrossEncoder", folder, cfg.device, cfg.threads)
        if cfg.max_length is not None:
            self._model.max_length = cfg.max_length

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        scores = self._model.predict(
            list(pairs), batch_size=self.batch_size, show_progress_bar=False
        )
        scores = np.asarray(scores, dtype=np.float64)
        if scores.shape != (len(pairs),):
            raise BackendError(
                f"{KEY}: the cross-encoder returned scores of shape {scores.shape} for "
                f"{len(pairs)} pairs; a reranker has one output label"
            )
        return scores


class Reranker:
    """Reranks rankings with ``identity``'s cross-encoder, pair scores from the store."""

    def __init__(self, cfg: RerankConfig, identity: ModelIdentity, cache: StageCache) -> None:
        self.cfg = cfg
        self.store = EmbeddingStore(cache, sha256_json({"reranker": identity.key}), 2)

    @cached_property
    def scorer(self) -> CrossEncoderScorer:
        return CrossEncoderScorer(self.cfg)  # loaded on the first pair not in the store

    def rerank(
        self, ranked: Sequence[Ranked], queries: Sequence[Query], texts: Sequence[str], top_k: int
    ) -> list[Ranked]:
        """Each ranking's top ``candidates`` reordered by the cross-encoder, cut at
        ``top_k``."""
        heads = [r.indices[: self.cfg.candidates] for r in ranked]
        pairs = [(q.text, texts[i]) for q, head in zip(queries, heads, strict=True) for i in head]
        rows = self._rows(pairs)
        out, begin = [], 0
        for first, head in zip(ranked, heads, strict=True):
            block = rows[begin : begin + len(head)]
            begin += len(head)
            out.append(_reordered(first, head, block, top_k))
        return out

    def _rows(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """``[score, seconds]`` per pair, computing only pairs never scored before."""
        keyed = {canonical_json(pair): pair for pair in pairs}
        return self.store.embed([canonical_json(p) for p in pairs], self._compute(keyed), STAGE)

    def _compute(self, keyed: dict[str, tuple[str, str]]) -> Any:
        def compute(missing: Sequence[str]) -> np.ndarray:
            """Scores query by query (one forward pass per query's pairs, as a served
            reranker would), each pair timed as its query's share."""
            by_query: dict[str, list[int]] = {}
            for row, key in enumerate(missing):
                by_query.setdefault(keyed[key][0], []).append(row)
            out = np.zeros((len(missing), 2), dtype=np.float32)
            for rows in by_query.values():
                started = time.perf_counter()
                out[rows, 0] = self.scorer.score([keyed[missing[r]] for r in rows])
                out[rows, 1] = (time.perf_counter() - started) / len(rows)
            return out

        return compute


def _reordered(first: Ranked, head: np.ndarray, rows: np.ndarray, top_k: int) -> Ranked:
    order = np.lexsort((np.arange(len(head)), -rows[:, 0].astype(np.float64)))[:top_k]
    indices = head[order]
    scores = rows[order, 0].astype(np.float32)
    seconds = float(rows[:, 1].sum())
    stages = first.stages or (("search", first.seconds),)
    return replace(
        first,
        indices=indices,
        scores=scores,
        seconds=first.seconds + seconds,
        stages=(*stages, ("rerank", seconds)),
    )
