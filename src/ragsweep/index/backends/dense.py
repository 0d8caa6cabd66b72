"""Dense backends: exact cosine search over L2-normalized vectors, embedded through the
content-addressed embedding store.

:class:`DenseBackend` is what ``use_m3``, ``ollama`` and ``openai`` register: each gives an
identity function and an encoder factory; embedding, caching and search are shared.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragsweep.cache.embeddings import EmbeddingStore
from ragsweep.cache.stage import StageCache
from ragsweep.config.schema import EmbeddingConfig
from ragsweep.core.errors import ContractError, DriftError
from ragsweep.core.hashing import sha256_json, source_digest
from ragsweep.core.progress import progress_bar
from ragsweep.index import base as index_module
from ragsweep.index.base import IndexProvenance, Query, Ranked, top_k_rows
from ragsweep.index.encoding import DenseEncoder, ModelIdentity, encode_in_batches


class QueryEmbedder(Protocol):
    """Embeds query texts with the model named by ``identity`` (rows L2-normalized)."""

    identity: ModelIdentity

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


SCORE_BLOCK_CELLS = 4_000_000
"""The most query x chunk scores a dense search holds at once. Selection needs ~13 bytes per
score (the float32 score, an int64 partition index, a comparison), so a block stays near
50 MB however large the index; up to ~15,000 chunks a whole search batch is one block."""


@dataclass
class DenseIndex:
    """Exact cosine search: vectors are L2-normalized, so the dot product is the cosine.

    Query embedding happens once for all queries before the timed search. The queries of
    one ``search`` call are scored together against one block of chunks at a time (at most
    ``SCORE_BLOCK_CELLS`` scores), each block's top k kept and the blocks' candidates merged,
    so the vectors are read once per call however large the index (blocking by queries
    instead would read them once per handful of queries: a cost growing with the square of
    the index). ``Ranked.seconds`` is the call's scoring and selection time divided by its
    number of queries: an amortized per-query time (:func:`ragsweep.eval.scoring.retrieve`
    passes batches of ``SEARCH_BATCH`` queries).
    """

    provenance: IndexProvenance
    vectors: np.ndarray
    embedder: QueryEmbedder

    @property
    def query_model(self) -> ModelIdentity:
        return self.embedder.identity

    def search(
        self, queries: Sequence[Query], top_k: int, query_preprocess: Mapping[str, Any]
    ) -> list[Ranked]:
        self.provenance.check_query_side(self.query_model, query_preprocess)
        query_vectors = self.embedder.embed([q.text for q in queries])
        check_query_dimension(query_vectors, self.vectors, self.query_model)
        # np.asarray: a plain view of a memory-mapped index, without np.memmap's per-call
        # subclass overhead.
        vectors = np.asarray(self.vectors)
        started = time.perf_counter()
        width = max(1, SCORE_BLOCK_CELLS // max(1, len(queries)))
        found: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in queries]
        for begin in range(0, len(vectors), width):
            scores = query_vectors @ vectors[begin : begin + width].T
            for row, query in enumerate(queries):
                if query.allowed is not None:
                    scores[row, ~query.allowed[begin : begin + width]] = -np.inf
            for row, picked in enumerate(top_k_rows(scores, top_k, -np.inf)):
                found[row].append((picked + begin, scores[row, picked]))
        best = [_merged_top_k(parts, top_k) for parts in found]
        each = (time.perf_counter() - started) / max(1, len(queries))
        return [Ranked(indices, scores, each) for indices, scores in best]


def check_query_dimension(
    query_vectors: np.ndarray, vectors: np.ndarray, model: ModelIdentity
) -> None:
    """ContractError when the query embeddings' width is not the index's: a model (or a
    served model's weights) that changed under the same identity, caught before scoring."""
    width, expected = query_vectors.shape[-1], vectors.shape[-1]
    if query_vectors.size and width != expected:
        raise ContractError(
            f"query embedding dimension {width} is not the index's {expected} "
            f"({model.describe()}): the query model is not the one the index was built with; "
            "rebuild the index (cache.enabled=false) or fix embedding.model"
        )


def _merged_top_k(
    parts: list[tuple[np.ndarray, np.ndarray]], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The k best of the blocks' candidates (each block's exact top k, see
    :func:`~ragsweep.index.base.top_k_rows`): highest score first, ties by chunk index, as
    one selection over every chunk gives."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    indices = np.concatenate([p[0] for p in parts])
    scores = np.concatenate([p[1] for p in parts])
    order = np.lexsort((indices, -scores))[:k]
    return indices[order], scores[order]


def build_dense_index(
    vectors: np.ndarray, embedder: QueryEmbedder, provenance: IndexProvenance
) -> DenseIndex:
    """Wrap precomputed chunk vectors; their shape must match the provenance."""
    expected = (provenance.n_chunks, provenance.model.dimension)
    if vectors.shape != expected:
        raise DriftError(f"index vectors have shape {vectors.shape}, provenance says {expected}")
    return DenseIndex(provenance=provenance, vectors=vectors, embedder=embedder)


EncoderFactory = Callable[[EmbeddingConfig], DenseEncoder]
QueryView = Callable[[DenseEncoder], DenseEncoder]
"""The same loaded model embedding queries differently (a query prompt)."""

_ENCODERS: dict[str, DenseEncoder] = {}


def shared_encoder(
    cfg: EmbeddingConfig, identity: ModelIdentity, make: EncoderFactory
) -> DenseEncoder:
    """One encoder per embedding config, resolved model identity and process (models are
    slow to load). The identity is part of the key because a served model can change under
    the same config: after an ``ollama pull`` of the tag a long process builds a fresh
    encoder instead of reusing the one for the old weights.

    Raises DriftError if a new encoder reports another identity (the model changed between
    resolving the configuration and loading it); such an encoder is not kept.
    """
    key = sha256_json({"config": cfg, "identity": identity})
    if key not in _ENCODERS:
        encoder = make(cfg)
        if encoder.identity != identity:
            raise DriftError(
                f"encoder reports {encoder.identity.describe()}, the configuration resolved "
                f"to {identity.describe()}"
            )
        _ENCODERS[key] = encoder
    return _ENCODERS[key]


class StoreEmbedder:
    """Embeds texts through the content-addressed store; loads the model only on a miss."""

    def __init__(
        self,
        cfg: EmbeddingConfig,
        identity: ModelIdentity,
        store: EmbeddingStore,
        stage: str,
        make: EncoderFactory,
        view: QueryView | None = None,
    ) -> None:
        self.identity = identity
        self.cfg = cfg
        self.stage = stage
        self.store = store
        self.make = make
        self.view = view

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.store.embed(texts, self._encode, self.stage)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        encoder = shared_encoder(self.cfg, self.identity, self.make)
        if self.view is not None:
            encoder = self.view(encoder)
        with progress_bar(f"{self.stage}: {len(texts)} texts", len(texts)) as advance:
            return encode_in_batches(encoder, texts, advance)


class DenseBackend:
    """A dense backend: ``identity`` resolves the model (without loading it), ``encoder``
    builds the encoder (loading it) on the first embedding miss.

    A backend that embeds queries unlike documents (a query prompt) gives ``query_view``;
    its query vectors then live in a store of their own (:func:`query_store_key`), since
    the same text is embedded differently as a query and as a chunk.
    """

    index_stage = "dense_index"
    index_code = ""  # the stored index is the vectors: the model identity says it all

    def __init__(
        self,
        identity: Callable[[EmbeddingConfig], ModelIdentity],
        encoder: EncoderFactory,
        query_view: QueryView | None = None,
    ) -> None:
        self._identity = identity
        self.encoder = encoder
        self.query_view = query_view

    @cached_property
    def search_code(self) -> str:
        """Scoring and top-k selection shape rankings (this module and index.py)."""
        return source_digest(sys.modules[__name__], index_module)

    def identity(self, cfg: EmbeddingConfig) -> ModelIdentity:
        return self._identity(cfg)

    def store_embedders(
        self, cfg: EmbeddingConfig, model: ModelIdentity, cache: StageCache
    ) -> tuple[StoreEmbedder, StoreEmbedder]:
        """The embedders of chunk texts and of queries, through the content-addressed
        store: what an index build and ``ragsweep embed --shard`` (:mod:`ragsweep.cli.embed_shard`)
        fill the cache with."""
        store = EmbeddingStore(cache, model.key, model.dimension)
        query_store = store  # chunks and queries share it unless queries are embedded apart
        if self.query_view is not None:
            query_store = EmbeddingStore(cache, query_store_key(model), model.dimension)
        chunks = StoreEmbedder(cfg, model, store, "embeddings", self.encoder)
        queries = StoreEmbedder(
            cfg, model, query_store, "query_embeddings", self.encoder, self.query_view
        )
        return chunks, queries

    def cached_index(
        self,
        texts: Sequence[str],
        key: str,
        cfg: EmbeddingConfig,
        provenance: IndexProvenance,
        cache: StageCache,
    ) -> DenseIndex:
        chunks, queries = self.store_embedders(cfg, provenance.model, cache)

        def build(folder: Path) -> None:
            np.save(folder / "vectors.npy", chunks.embed(texts), allow_pickle=False)
            provenance.write(folder)

        def load(folder: Path) -> DenseIndex:
            provenance.check_stored(folder)
            vectors = np.load(folder / "vectors.npy", mmap_mode="r")
            return build_dense_index(vectors, queries, provenance)

        return cache.get_or_build(self.index_stage, key, build, load)


def query_store_key(model: ModelIdentity) -> str:
    """The embedding-store key of a model's query vectors when queries are embedded unlike
    documents (see :class:`DenseBackend`)."""
    return sha256_json({"model": model.key, "role": "query"})
