"""The ``ann`` backend: approximate nearest-neighbour search (faiss HNSW) over a dense
backend's vectors, for indexes too large for exact search.

``embedding=ann`` with ``embedding.options.base`` naming the dense side (an ``embedding``
option such as ``use_m3`` or ``sentence_transformers``, or a mapping). The HNSW graph's
parameters are config; each run also searches its own questions exactly and logs the
recall of the approximate top-k against the exact one (``ann/recall_at_<k>``), so the
price of approximation is measured, not assumed. Questions with a scope are searched
exactly (an HNSW graph cannot be restricted to a document set here).

Needs the extra ``pip install 'ragsweep[ann]'`` (faiss-cpu).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

import numpy as np

from ragsweep import __version__
from ragsweep.cache.stage import StageCache
from ragsweep.config.schema import EmbeddingConfig, from_mapping
from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import sha256_json, source_digest
from ragsweep.index import base as index_module
from ragsweep.index.backends.dense import DenseIndex, check_query_dimension
from ragsweep.index.backends.hybrid import component_errors, component_index_key, named_component
from ragsweep.index.base import BACKENDS, IndexProvenance, Query, Ranked
from ragsweep.index.encoding import ModelIdentity, options_for

STAGE = "ann_index"


@dataclass(frozen=True)
class AnnOptions:
    """``base``: the dense backend whose vectors are indexed (a ``conf/embedding`` option
    name or a mapping); ``m``: HNSW neighbours per node; ``ef_construction``: candidate list
    size while building; ``ef_search``: candidate list size per search (larger: higher
    recall, slower). All change rankings."""

    base: dict[str, Any] | str = "use_m3"
    m: int = 32
    ef_construction: int = 200
    ef_search: int = 64

    def __post_init__(self) -> None:
        for key in ("m", "ef_construction", "ef_search"):
            if getattr(self, key) < 1:
                raise ConfigError(f"embedding.options.{key}={getattr(self, key)} must be >= 1")

    @property
    def graph(self) -> dict[str, int]:
        return {"m": self.m, "ef_construction": self.ef_construction}


def faiss_version() -> str:
    try:
        return package_version("faiss-cpu")
    except PackageNotFoundError:
        raise ConfigError(
            "embedding=ann needs faiss; install the extra: pip install 'ragsweep[ann]'"
        ) from None


def base_config(options: AnnOptions) -> EmbeddingConfig:
    """The dense side's embedding config; errors name ``embedding.options.base``."""
    value = named_component(options.base, "base") if isinstance(options.base, str) else options.base
    with component_errors("base"):
        cfg = from_mapping(EmbeddingConfig, value, "embedding")
        BACKENDS.get(cfg.backend)
    return cfg


def ann_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    """The base identity, the HNSW parameters and the faiss version."""
    options = options_for(AnnOptions, cfg)
    faiss = faiss_version()
    base_cfg = base_config(options)
    with component_errors("base"):
        base = BACKENDS.get(base_cfg.backend).identity(base_cfg)
    if base.dimension < 1 or not base.normalized:
        raise ConfigError(
            f"embedding.options.base={base_cfg.backend!r} is not a dense backend with "
            "L2-normalized vectors"
        )
    return ModelIdentity(
        backend="ann",
        name=f"hnsw:{base.backend}:{base.name}",
        version=f"faiss {faiss}",
        dimension=base.dimension,
        normalized=True,
        digest=sha256_json(base),
        options={**options.graph, "ef_search": options.ef_search, "base": asdict(base)},
    )


@dataclass
class AnnIndex:
    """HNSW search over the base index's vectors (inner product = cosine).

    ``Ranked.seconds`` is the faiss search time of the batch divided by its questions
    (query embedding excluded, as for exact dense search).
    """

    provenance: IndexProvenance
    exact: DenseIndex
    graph: Any
    ef_search: int

    @property
    def query_model(self) -> ModelIdentity:
        return self.provenance.model

    def search(
        self, queries: Sequence[Query], top_k: int, query_preprocess: Mapping[str, Any]
    ) -> list[Ranked]:
        self.provenance.check_query_side(self.query_model, query_preprocess)
        free = [i for i, q in enumerate(queries) if q.allowed is None]
        out: list[Ranked | None] = [None] * len(queries)
        if free:
            approximate = self._approximate([queries[i] for i in free], top_k)
            for i, ranked in zip(free, approximate, strict=True):
                out[i] = ranked
        scoped = [i for i, q in enumerate(queries) if q.allowed is not None]
        exact = self.exact_search([queries[i] for i in scoped], top_k)
        for i, ranked in zip(scoped, exact, strict=True):
            out[i] = ranked
        return [r for r in out if r is not None]

    def _approximate(self, queries: Sequence[Query], top_k: int) -> list[Ranked]:
        vectors = self.exact.embedder.embed([q.text for q in queries])
        check_query_dimension(vectors, self.exact.vectors, self.query_model)
        started = time.perf_counter()
        self.graph.hnsw.efSearch = max(self.ef_search, top_k)
        scores, indices = self.graph.search(np.ascontiguousarray(vectors), top_k)
        each = (time.perf_counter() - started) / len(queries)
        return [
            Ranked(row[row >= 0].astype(np.int64), s[row >= 0], each)
            for row, s in zip(indices, scores, strict=True)
        ]

    def exact_search(self, queries: Sequence[Query], top_k: int) -> list[Ranked]:
        """The exact top-k of the base index (the reference the recall is measured on)."""
        if not queries:
            return []
        base = self.exact.provenance
        return self.exact.search(queries, top_k, base.preprocess)

    def run_metrics(self, queries: Sequence[Query], ranked: Sequence[Ranked]) -> dict[str, float]:
        """``ann/recall_at_<k>``: mean over questions of |approximate ∩ exact top k| / k
        (the exact list's length when shorter), for this run's questions."""
        depth = max((len(r.indices) for r in ranked), default=0)
        if depth == 0:
            return {}
        exact = [r for batch in _batches(queries) for r in self.exact_search(batch, depth)]
        overlap = [
            len(set(a.indices.tolist()) & set(e.indices.tolist())) / max(1, len(e.indices))
            for a, e in zip(ranked, exact, strict=True)
        ]
        return {f"ann/recall_at_{depth}": float(np.mean(overlap))}


def _batches(queries: Sequence[Query], size: int = 256) -> list[Sequence[Query]]:
    return [queries[i : i + size] for i in range(0, len(queries), size)]


class AnnBackend:
    """The registered ``ann`` backend."""

    index_stage = STAGE
    measures_rankings = True  # its index has run_metrics: recall against exact search

    @cached_property
    def index_code(self) -> str:
        return source_digest(sys.modules[__name__])

    @cached_property
    def search_code(self) -> str:
        return source_digest(sys.modules[__name__], index_module)

    def identity(self, cfg: EmbeddingConfig) -> ModelIdentity:
        return ann_identity(cfg)

    def cached_index(
        self,
        texts: Sequence[str],
        key: str,
        cfg: EmbeddingConfig,
        provenance: IndexProvenance,
        cache: StageCache,
    ) -> AnnIndex:
        import faiss

        options = options_for(AnnOptions, cfg)
        base_cfg = base_config(options)
        backend = BACKENDS.get(base_cfg.backend)
        base_model = ModelIdentity(**provenance.model.options["base"])
        base_key = component_index_key(texts, base_model, backend)
        base_provenance = replace(provenance, model=base_model)
        exact = backend.cached_index(texts, base_key, base_cfg, base_provenance, cache)
        assert isinstance(exact, DenseIndex)
        graph_key = sha256_json(
            {
                "base": base_key,
                "graph": options.graph,
                "code": self.index_code,
                "faiss": faiss_version(),
                "ragsweep": __version__,
            }
        )

        def build(folder: Path) -> None:
            graph = faiss.IndexHNSWFlat(base_model.dimension, options.m, faiss.METRIC_INNER_PRODUCT)
            graph.hnsw.efConstruction = options.ef_construction
            graph.add(np.ascontiguousarray(exact.vectors, dtype=np.float32))
            np.save(folder / "hnsw.npy", faiss.serialize_index(graph), allow_pickle=False)

        def load(folder: Path) -> Any:
            return faiss.deserialize_index(np.load(folder / "hnsw.npy", allow_pickle=False))

        graph = cache.get_or_build(STAGE, graph_key, build, load)
        return AnnIndex(provenance, exact, graph, options.ef_search)


BACKENDS.add("ann", AnnBackend())
