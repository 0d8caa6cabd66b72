"""Cached construction of a run's chunks, indexed texts and index (see docs/caching.md).

Each stage's key hashes exactly the inputs that change its output:

- chunks: corpus content hash + chunking mode/size/overlap + chunker source digest;
- indexed texts: chunks key + heading prefix flag + preprocessor identity (steps and the
  synonym file's content hash);
- embeddings and query embeddings: model identity + the exact text (content-addressed);
- dense index: indexed-texts key + model identity; BM25 index: indexed-texts key + model
  identity (BM25 parameters, tokenizer settings, bm25s version);
- rankings: index key + every query's text and scope mask + top_k + search code.

Nothing about evaluation (``eval.*``, the golden set, tracking) is part of an index key;
scoring is never cached.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ragsweep import __version__
from ragsweep import index as index_module
from ragsweep import preprocess as preprocess_module
from ragsweep import tokenize as tokenize_module
from ragsweep.cache import EmbeddingStore, StageCache, write_json
from ragsweep.chunking import (
    CHUNKER_SOURCE_DIGEST,
    Chunk,
    chunk_corpus,
    indexed_text,
    make_chunk,
)
from ragsweep.config import ChunkingConfig, EmbeddingConfig
from ragsweep.corpus import Corpus
from ragsweep.embedding import (
    BACKENDS,
    BM25Options,
    DenseEncoder,
    ModelIdentity,
    encode_in_batches,
    options_for,
)
from ragsweep.errors import DriftError
from ragsweep.hashing import sha256_json, source_digest
from ragsweep.index import (
    Index,
    IndexProvenance,
    Query,
    Ranked,
    build_bm25_index,
    build_dense_index,
    load_bm25_index,
    save_bm25_index,
)
from ragsweep.preprocess import Preprocessor
from ragsweep.progress import progress_bar


def chunks_key(corpus: Corpus, cfg: ChunkingConfig) -> str:
    """Key of a chunk set: corpus content, the span-shaping chunking fields, chunker code."""
    return sha256_json(
        {
            "corpus": corpus.content_hash(),
            "mode": cfg.mode,
            "size": cfg.size,
            "overlap": cfg.overlap,
            "chunker_code": CHUNKER_SOURCE_DIGEST,
        }
    )


# Code that shapes a stage's output is part of its key, as the chunker's is: editing the
# cleanup rules or the tokenizer must not serve texts or BM25 indexes made by the old code.
PREPROCESS_CODE_DIGEST = source_digest(preprocess_module)
LEXICAL_CODE_DIGEST = source_digest(tokenize_module, index_module)


def texts_key(chunks_key_: str, heading_prefix: bool, preprocessor: Preprocessor) -> str:
    return sha256_json(
        {
            "chunks": chunks_key_,
            "heading_prefix": heading_prefix,
            "preprocess": preprocessor.identity,
            "preprocess_code": PREPROCESS_CODE_DIGEST,
        }
    )


def index_key(texts_key_: str, model: ModelIdentity, sparse: bool) -> str:
    """Key of a dense or BM25 index. The ragsweep version is part of it because it is part
    of the stored provenance: an upgrade rebuilds indexes (from cached vectors) instead of
    failing the provenance check."""
    code = LEXICAL_CODE_DIGEST if sparse else None  # dense scores come from the vectors
    return sha256_json(
        {"texts": texts_key_, "model": model, "ragsweep": __version__, "lexical_code": code}
    )


# The ranking a query gets depends on the index, the query text and scope, k, and the
# search code itself (scoring, top-k selection and tie order live in index.py).
SEARCH_CODE_DIGEST = LEXICAL_CODE_DIGEST  # the same two modules


def rankings_key(index_key_: str, queries: Sequence[Query], top_k: int) -> str:
    """Key of the rankings of ``queries``: the index, every query's text and scope mask (in
    order), ``top_k`` and the search code."""
    listed = [
        [q.text, None if q.allowed is None else np.packbits(q.allowed).tobytes().hex()]
        for q in queries
    ]
    return sha256_json(
        {
            "index": index_key_,
            "queries": sha256_json(listed),
            "top_k": top_k,
            "search_code": SEARCH_CODE_DIGEST,
        }
    )


def cached_rankings(
    index: Index,
    index_key_: str,
    queries: Sequence[Query],
    query_preprocess: Mapping[str, Any],
    top_k: int,
    search: Callable[[], list[Ranked]],
    cache: StageCache,
) -> list[Ranked]:
    """The rankings of ``queries`` on ``index``; ``search`` runs them on a miss.

    A hit returns the rankings and per-query search times recorded when they were
    computed. The query side is checked against the index's provenance either way, so a
    drifted query model or preprocessing fails as it would before a search.
    """
    index.provenance.check_query_side(index.query_model, query_preprocess)

    def build(folder: Path) -> None:
        ranked = search()
        indices = np.full((len(ranked), top_k), -1, dtype=np.int64)
        scores = np.zeros((len(ranked), top_k), dtype=np.float32)
        for row, r in enumerate(ranked):
            indices[row, : len(r.indices)] = r.indices
            scores[row, : len(r.scores)] = r.scores
        np.save(folder / "indices.npy", indices, allow_pickle=False)
        np.save(folder / "scores.npy", scores, allow_pickle=False)
        np.save(folder / "seconds.npy", np.array([r.seconds for r in ranked]), allow_pickle=False)

    def load(folder: Path) -> list[Ranked]:
        indices = np.load(folder / "indices.npy", allow_pickle=False)
        scores = np.load(folder / "scores.npy", allow_pickle=False)
        seconds = np.load(folder / "seconds.npy", allow_pickle=False).tolist()
        if indices.shape != (len(queries), top_k) or len(seconds) != len(queries):
            raise DriftError(f"cached rankings {folder} do not match {len(queries)} queries")
        lengths = (indices >= 0).sum(axis=1).tolist()
        return [
            Ranked(indices[row, :n], scores[row, :n], seconds[row]) for row, n in enumerate(lengths)
        ]

    return cache.get_or_build("rankings", rankings_key(index_key_, queries, top_k), build, load)


def cached_chunks(corpus: Corpus, cfg: ChunkingConfig, key: str, cache: StageCache) -> list[Chunk]:
    """The corpus's chunks under ``key`` (:func:`chunks_key`); spans are cached, texts are
    re-sliced from the source."""

    def encode(chunks: list[Chunk]) -> list[list[Any]]:
        return [[c.doc, c.start, c.end, list(c.heading_path)] for c in chunks]

    def decode(rows: list[list[Any]]) -> list[Chunk]:
        return [make_chunk(corpus.get(d), s, e, tuple(path)) for d, s, e, path in rows]

    return cache.json_value("chunks", key, lambda: chunk_corpus(corpus, cfg), encode, decode)


def cached_texts(
    chunks: Sequence[Chunk],
    key: str,
    heading_prefix: bool,
    preprocessor: Preprocessor,
    cache: StageCache,
) -> list[str]:
    """The preprocessed text that is indexed for each chunk."""

    def compute() -> list[str]:
        return [preprocessor(indexed_text(c, heading_prefix)) for c in chunks]

    return cache.json_value("texts", key, compute, list, list)


_ENCODERS: dict[str, DenseEncoder] = {}


def _shared_encoder(cfg: EmbeddingConfig, identity: ModelIdentity) -> DenseEncoder:
    """One encoder per embedding config, resolved model identity and process (models are
    slow to load). The identity is part of the key because a served model can change under
    the same config: after an ``ollama pull`` of the tag a long process builds a fresh
    encoder instead of reusing the one for the old weights.

    Raises DriftError if a new encoder reports another identity (the model changed between
    resolving the configuration and loading it); such an encoder is not kept.
    """
    key = sha256_json({"config": cfg, "identity": identity})
    if key not in _ENCODERS:
        backend = BACKENDS.get(cfg.backend)
        assert backend.make_encoder is not None
        encoder = backend.make_encoder(cfg)
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
        self, cfg: EmbeddingConfig, identity: ModelIdentity, store: EmbeddingStore, stage: str
    ) -> None:
        self.identity = identity
        self.cfg = cfg
        self.stage = stage
        self.store = store

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.store.embed(texts, self._encode, self.stage)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        encoder = _shared_encoder(self.cfg, self.identity)
        with progress_bar(f"{self.stage}: {len(texts)} texts", len(texts)) as advance:
            return encode_in_batches(encoder, texts, advance)


def is_sparse(cfg: EmbeddingConfig) -> bool:
    """True for a lexical (BM25) backend, False for a dense one."""
    return BACKENDS.get(cfg.backend).kind == "sparse"


def cached_index(
    texts: Sequence[str],
    key: str,
    cfg: EmbeddingConfig,
    provenance: IndexProvenance,
    cache: StageCache,
) -> Index:
    """The dense or BM25 index over ``texts`` under ``key`` (:func:`index_key`); its stored
    provenance must match."""
    backend = BACKENDS.get(cfg.backend)
    model = provenance.model
    build: Callable[[Path], None]
    load: Callable[[Path], Index]
    if backend.kind == "sparse":
        options = options_for(BM25Options, cfg)

        def build(folder: Path) -> None:
            save_bm25_index(build_bm25_index(texts, options, provenance), folder / "bm25")
            _write_provenance(folder, provenance)

        def load(folder: Path) -> Index:
            _check_provenance(folder, provenance)
            return load_bm25_index(folder / "bm25", options, provenance)

        return cache.get_or_build("bm25_index", key, build, load)

    store = EmbeddingStore(cache, model.key, model.dimension)  # chunks and queries share it
    chunk_embedder = StoreEmbedder(cfg, model, store, "embeddings")
    query_embedder = StoreEmbedder(cfg, model, store, "query_embeddings")

    def build_dense(folder: Path) -> None:
        np.save(folder / "vectors.npy", chunk_embedder.embed(texts), allow_pickle=False)
        _write_provenance(folder, provenance)

    def load_dense(folder: Path) -> Index:
        _check_provenance(folder, provenance)
        vectors = np.load(folder / "vectors.npy", mmap_mode="r")
        return build_dense_index(vectors, query_embedder, provenance)

    return cache.get_or_build("dense_index", key, build_dense, load_dense)


def _write_provenance(folder: Path, provenance: IndexProvenance) -> None:
    write_json(folder / "provenance.json", asdict(provenance))


def _check_provenance(folder: Path, expected: IndexProvenance) -> None:
    stored = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
    wanted = json.loads(json.dumps(asdict(expected)))
    if stored != wanted:
        differing = sorted(k for k in wanted if stored.get(k) != wanted.get(k))
        raise DriftError(
            f"cached index {folder} has provenance {', '.join(differing)} = "
            f"{ {k: stored.get(k) for k in differing} }, expected "
            f"{ {k: wanted.get(k) for k in differing} }"
        )
