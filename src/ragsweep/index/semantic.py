"""The model that embeds sentences for ``chunking.mode=semantic``, decided before any work.

The configured embedding when its backend keeps vectors in the embedding store (a dense
backend: ``use_m3``, ``sentence_transformers``, ``ollama``, ``openai``); otherwise (BM25,
hybrids, ``ann``, custom and external backends) the fallback :data:`FALLBACK_EMBEDDING`,
the offline multilingual USE v3 (``use_m3``, a core dependency: nothing is downloaded).
Sentence vectors go through the embedding store, so a second run (or another chunk size)
embeds nothing again. The model's key is part of the chunks' cache key and of the config
hash.
"""

from __future__ import annotations

from dataclasses import replace

from ragsweep.cache.stage import StageCache
from ragsweep.chunk.chunkers import SEMANTIC, ChunkTools
from ragsweep.config.schema import ChunkingConfig, EmbeddingConfig
from ragsweep.index.backends import BACKENDS
from ragsweep.index.encoding import ModelIdentity

FALLBACK_EMBEDDING = EmbeddingConfig("use_m3")
"""The sentence model of a backend that embeds nothing itself (module docstring)."""


def semantic_embedding(
    chunking: ChunkingConfig, embedding: EmbeddingConfig
) -> EmbeddingConfig | None:
    """The embedding config sentences are embedded with; None unless the mode is semantic."""
    if chunking.mode != SEMANTIC:
        return None
    keeps_vectors = hasattr(BACKENDS.get(embedding.backend), "store_embedders")
    return embedding if keeps_vectors else FALLBACK_EMBEDDING


def sentence_model_line(chunking: ChunkingConfig, embedding: EmbeddingConfig) -> str | None:
    """How a run's summary names the sentence model (None unless the mode is semantic)."""
    cfg = semantic_embedding(chunking, embedding)
    if cfg is None:
        return None
    fallback = (
        " (fallback: the configured backend embeds nothing)" if cfg is FALLBACK_EMBEDDING else ""
    )
    return f"embedded by {cfg.backend}{' ' + cfg.model if cfg.model else ''}{fallback}"


def semantic_identity(chunking: ChunkingConfig, embedding: EmbeddingConfig) -> ModelIdentity | None:
    """The identity of that model (a served model is asked for it), or None."""
    cfg = semantic_embedding(chunking, embedding)
    return None if cfg is None else BACKENDS.get(cfg.backend).identity(cfg)


def with_sentence_embedder(
    tools: ChunkTools, chunking: ChunkingConfig, embedding: EmbeddingConfig, cache: StageCache
) -> ChunkTools:
    """``tools`` with the cache-backed embedding function of semantic chunking (unchanged
    for another mode)."""
    cfg = semantic_embedding(chunking, embedding)
    if cfg is None:
        return tools
    backend = BACKENDS.get(cfg.backend)
    identity = backend.identity(cfg)
    chunk_embedder, _ = backend.store_embedders(cfg, identity, cache)  # type: ignore[attr-defined]
    return replace(tools, embed=chunk_embedder.embed)
