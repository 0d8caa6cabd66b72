"""Indexes over chunk text, their provenance, and top-k search.

Two index kinds: :class:`DenseIndex` (exact cosine search over L2-normalized vectors in
numpy) and :class:`BM25Index` (bm25s, Lucene BM25 over the CJK-aware tokenizer). Every index
carries an :class:`IndexProvenance`; the query side is checked against it before any search
(:meth:`IndexProvenance.check_query_side`), and a mismatch is a :class:`DriftError`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragsweep import __version__
from ragsweep.embedding import BM25Options, ModelIdentity, bm25_identity
from ragsweep.errors import DriftError
from ragsweep.tokenize import TokenizerConfig, tokenize


@dataclass(frozen=True)
class IndexProvenance:
    """What an index was built from. Compared field by field against the query side."""

    model: ModelIdentity
    preprocess: dict[str, Any]
    chunking_key: str
    corpus_hash: str
    n_chunks: int
    ragsweep_version: str = __version__

    def check_query_side(self, model: ModelIdentity, preprocess: Mapping[str, Any]) -> None:
        """Raise DriftError naming both sides if queries would be encoded differently."""
        if model != self.model:
            fields = ", ".join(self.model.differences(model))
            raise DriftError(
                f"embedding drift ({fields}): index built with {self.model.describe()}, "
                f"queries encoded with {model.describe()}; rebuild the index or use the "
                "same model"
            )
        if dict(preprocess) != self.preprocess:
            raise DriftError(
                f"preprocessing drift: index built with {self.preprocess}, "
                f"queries preprocessed with {preprocess}"
            )


@dataclass(frozen=True)
class Query:
    """A preprocessed question and the chunk mask of its scope (None = all chunks)."""

    text: str
    allowed: np.ndarray | None = None


@dataclass(frozen=True)
class Ranked:
    """Top-k result of one query: chunk indices (best first), their scores, and the search
    time of the query in seconds (scoring + selection; query embedding excluded; for a
    dense index the amortized share of a batch, see :class:`DenseIndex`)."""

    indices: np.ndarray
    scores: np.ndarray
    seconds: float


class Index(Protocol):
    """A searchable index. ``search`` first checks the query side (``query_model`` and the
    identity of the preprocessing the queries went through) against the provenance."""

    provenance: IndexProvenance

    @property
    def query_model(self) -> ModelIdentity: ...

    def search(
        self, queries: Sequence[Query], top_k: int, query_preprocess: Mapping[str, Any]
    ) -> list[Ranked]: ...


def top_k_indices(scores: np.ndarray, k: int, min_score: float) -> np.ndarray:
    """Indices of the k highest scores above ``min_score``, best first; ties by index."""
    candidates = np.flatnonzero(scores > min_score)
    if candidates.size > k:
        part = np.argpartition(-scores[candidates], k - 1)[:k]
        threshold = scores[candidates[part]].min()
        candidates = candidates[scores[candidates] >= threshold]  # keep ties for stable order
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order][:k]


def top_k_rows(scores: np.ndarray, k: int, min_score: float) -> list[np.ndarray]:
    """:func:`top_k_indices` of every row of ``scores`` (queries x chunks), in one pass.

    Rows whose k-th best score is tied with a score outside the top k, and rows with fewer
    than k scores above ``min_score``, go through :func:`top_k_indices` one by one, so
    every row gets exactly what :func:`top_k_indices` gives it.
    """
    n_rows, n_cols = scores.shape
    if n_rows == 0 or n_cols == 0 or k < 1:
        return [np.empty(0, dtype=np.int64) for _ in range(n_rows)]
    width = min(k, n_cols)
    part = np.argpartition(scores, n_cols - width, axis=1)[:, n_cols - width :]
    values = np.take_along_axis(scores, part, axis=1)
    kth = values.min(axis=1)
    plain = ((scores >= kth[:, None]).sum(axis=1) == width) & (kth > min_score)
    order = np.lexsort((part, -values), axis=1)
    ranked = np.take_along_axis(part, order, axis=1)
    return [
        ranked[row] if plain[row] else top_k_indices(scores[row], k, min_score)
        for row in range(n_rows)
    ]


def _select(scores: np.ndarray, query: Query, k: int, min_score: float) -> np.ndarray:
    if query.allowed is not None:
        scores = np.where(query.allowed, scores, -np.inf)
    return top_k_indices(scores, k, min_score)


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
    one ``search`` call are scored with one matrix product per block (at most
    ``SCORE_BLOCK_CELLS`` scores) and selected together, so ``Ranked.seconds`` is the
    block's scoring and top-k selection time divided by its number of queries: an
    amortized per-query time (:func:`ragsweep.evaluate.retrieve` passes batches of
    ``SEARCH_BATCH`` queries).
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
        # np.asarray: a plain view of a memory-mapped index, without np.memmap's per-call
        # subclass overhead.
        vectors = np.asarray(self.vectors)
        rows = max(1, SCORE_BLOCK_CELLS // max(1, len(vectors)))
        results: list[Ranked] = []
        for begin in range(0, len(queries), rows):
            block = queries[begin : begin + rows]
            started = time.perf_counter()
            scores = query_vectors[begin : begin + rows] @ vectors.T
            for row, query in enumerate(block):
                if query.allowed is not None:
                    scores[row, ~query.allowed] = -np.inf
            picked = top_k_rows(scores, top_k, -np.inf)
            each = (time.perf_counter() - started) / len(block)
            results += [Ranked(i, scores[row, i], each) for row, i in enumerate(picked)]
        return results


@dataclass
class BM25Index:
    """bm25s over tokenized chunk text. Chunks sharing no token with the query score 0 and
    are not retrieved: their order would be arbitrary."""

    provenance: IndexProvenance
    options: BM25Options
    model: Any = field(repr=False)

    @property
    def tokenizer(self) -> TokenizerConfig:
        return TokenizerConfig(lowercase=self.options.lowercase, cjk_ngram=self.options.cjk_ngram)

    @cached_property
    def query_model(self) -> ModelIdentity:
        return bm25_identity(self.options)  # reads bm25s's package metadata: once per index

    def search(
        self, queries: Sequence[Query], top_k: int, query_preprocess: Mapping[str, Any]
    ) -> list[Ranked]:
        self.provenance.check_query_side(self.query_model, query_preprocess)
        results = []
        for query in queries:
            started = time.perf_counter()
            scores = self._scores(tokenize(query.text, self.tokenizer))
            indices = _select(scores, query, top_k, 0.0)
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
    tokenizer = TokenizerConfig(lowercase=options.lowercase, cjk_ngram=options.cjk_ngram)
    corpus_tokens = [tokenize(text, tokenizer) for text in texts]
    model = bm25s.BM25(k1=options.k1, b=options.b, method="lucene")
    model.index(corpus_tokens, show_progress=False)
    return BM25Index(provenance=provenance, options=options, model=model)


def build_dense_index(
    vectors: np.ndarray, embedder: QueryEmbedder, provenance: IndexProvenance
) -> DenseIndex:
    """Wrap precomputed chunk vectors; their shape must match the provenance."""
    expected = (provenance.n_chunks, provenance.model.dimension)
    if vectors.shape != expected:
        raise DriftError(f"index vectors have shape {vectors.shape}, provenance says {expected}")
    return DenseIndex(provenance=provenance, vectors=vectors, embedder=embedder)


ScopeMask = Callable[[Sequence[str] | None], np.ndarray | None]


def scope_masker(chunk_docs: Sequence[str]) -> ScopeMask:
    """A function from a case's scope (doc ids) to a boolean chunk mask, memoized."""
    docs = np.asarray(chunk_docs, dtype=object)
    memo: dict[tuple[str, ...], np.ndarray] = {}

    def mask(scope: Sequence[str] | None) -> np.ndarray | None:
        if scope is None:
            return None
        key = tuple(sorted(scope))
        if key not in memo:
            memo[key] = np.isin(docs, list(key))
        return memo[key]

    return mask


def save_bm25_index(index: BM25Index, folder: Path) -> None:
    """Write the bm25s arrays (``.npy``, no pickles) and vocabulary into ``folder``."""
    index.model.save(str(folder), allow_pickle=False, show_progress=False)


def load_bm25_index(folder: Path, options: BM25Options, provenance: IndexProvenance) -> BM25Index:
    """Load a saved bm25s index memory-mapped (see :func:`save_bm25_index`)."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    model = bm25s.BM25.load(str(folder), mmap=True, allow_pickle=False, show_progress=False)
    return BM25Index(provenance=provenance, options=options, model=model)
