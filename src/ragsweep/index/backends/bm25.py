"""The ``bm25`` backend: sparse lexical scoring with bm25s (Lucene BM25) over the CJK-aware
tokenizer. Its index is the bm25s arrays (``.npy``, no pickles), memory-mapped on load."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import numpy as np

from ragsweep.cache.stage import StageCache
from ragsweep.config.schema import EmbeddingConfig, result_fields
from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import source_digest
from ragsweep.index import base as index_module
from ragsweep.index import tokenize as tokenize_module
from ragsweep.index.base import BACKENDS, IndexProvenance, Query, Ranked, top_k_indices
from ragsweep.index.encoding import ModelIdentity, options_for
from ragsweep.index.tokenize import TokenizerConfig, tokenize


@dataclass(frozen=True)
class BM25Options:
    """BM25 parameters (Lucene variant) and tokenizer settings; all affect scores."""

    k1: float = 1.5
    b: float = 0.75
    lowercase: bool = True
    cjk_ngram: int = 2

    def __post_init__(self) -> None:
        if self.k1 < 0:
            raise ConfigError(f"embedding.options.k1={self.k1} must be >= 0")
        if not 0.0 <= self.b <= 1.0:
            raise ConfigError(f"embedding.options.b={self.b} must be in [0, 1]")
        if self.cjk_ngram < 1:
            raise ConfigError(f"embedding.options.cjk_ngram={self.cjk_ngram} must be >= 1")

    @property
    def tokenizer(self) -> TokenizerConfig:
        return TokenizerConfig(lowercase=self.lowercase, cjk_ngram=self.cjk_ngram)


def bm25_identity(options: BM25Options) -> ModelIdentity:
    """What BM25 scores depend on: the bm25s version, k1/b and the tokenizer settings."""
    return ModelIdentity(
        backend="bm25",
        name="bm25s-lucene",
        version=package_version("bm25s"),
        dimension=0,
        normalized=False,
        options=result_fields(options),
    )


@dataclass
class BM25Index:
    """bm25s over tokenized chunk text. Chunks sharing no token with the query score 0 and
    are not retrieved: their order would be arbitrary."""

    provenance: IndexProvenance
    options: BM25Options
    model: Any = field(repr=False)

    @cached_property
    def query_model(self) -> ModelIdentity:
        return bm25_identity(self.options)  # reads bm25s's package metadata: once per index

    def search(
        self, queries: Sequence[Query], top_k: int, query_preprocess: Mapping[str, Any]
    ) -> list[Ranked]:
        """Each query scored and selected on its own; ``Ranked.seconds`` is its own time."""
        self.provenance.check_query_side(self.query_model, query_preprocess)
        results = []
        for query in queries:
            started = time.perf_counter()
            scores = self._scores(tokenize(query.text, self.options.tokenizer))
            if query.allowed is not None:
                scores = np.where(query.allowed, scores, -np.inf)
            indices = top_k_indices(scores, top_k, 0.0)
            results.append(Ranked(indices, scores[indices], time.perf_counter() - started))
        return results

    def _scores(self, tokens: list[str]) -> np.ndarray:
        if not tokens:
            return np.zeros(self.provenance.n_chunks, dtype=np.float32)
        return np.asarray(self.model.get_scores(tokens), dtype=np.float32)


def build_bm25_index(
    texts: Sequence[str], options: BM25Options, provenance: IndexProvenance
) -> BM25Index:
    """Tokenize ``texts`` and build a bm25s index (Lucene BM25, ``k1``/``b`` from options)."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s forces DEBUG on import
    corpus_tokens = [tokenize(text, options.tokenizer) for text in texts]
    model = bm25s.BM25(k1=options.k1, b=options.b, method="lucene")
    model.index(corpus_tokens, show_progress=False)
    return BM25Index(provenance=provenance, options=options, model=model)


def save_bm25_index(index: BM25Index, folder: Path) -> None:
    """Write the bm25s arrays (``.npy``, no pickles) and vocabulary into ``folder``."""
    index.model.save(str(folder), allow_pickle=False, show_progress=False)


def load_bm25_index(folder: Path, options: BM25Options, provenance: IndexProvenance) -> BM25Index:
    """Load a saved bm25s index memory-mapped (see :func:`save_bm25_index`)."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    model = bm25s.BM25.load(str(folder), mmap=True, allow_pickle=False, show_progress=False)
    return BM25Index(provenance=provenance, options=options, model=model)


class BM25Backend:
    """The registered ``bm25`` backend."""

    index_stage = "bm25_index"

    # The tokenizer shapes the stored index; tokenizer, scoring and top-k selection
    # (index.py) shape rankings: editing them must not serve results of the old code.
    @cached_property
    def index_code(self) -> str:
        return source_digest(tokenize_module, sys.modules[__name__])

    @cached_property
    def search_code(self) -> str:
        return source_digest(tokenize_module, sys.modules[__name__], index_module)

    def identity(self, cfg: EmbeddingConfig) -> ModelIdentity:
        return bm25_identity(options_for(BM25Options, cfg))

    def cached_index(
        self,
        texts: Sequence[str],
        key: str,
        cfg: EmbeddingConfig,
        provenance: IndexProvenance,
        cache: StageCache,
    ) -> BM25Index:
        options = options_for(BM25Options, cfg)

        def build(folder: Path) -> None:
            save_bm25_index(build_bm25_index(texts, options, provenance), folder / "bm25")
            provenance.write(folder)

        def load(folder: Path) -> BM25Index:
            provenance.check_stored(folder)
            return load_bm25_index(folder / "bm25", options, provenance)

        return cache.get_or_build(self.index_stage, key, build, load)


BACKENDS.add("bm25", BM25Backend())
