"""The ``hybrid`` backend: a sparse and a dense backend over the same chunks, their
rankings fused (:mod:`ragsweep.index.fusion`).

Configured as ``embedding=hybrid``; each component (``embedding.options.sparse`` /
``embedding.options.dense``) is the name of an ``embedding`` option (``bm25``, ``use_m3``,
``sentence_transformers``: that file of ``conf/embedding/``) or a mapping shaped like the
``embedding`` group (``{backend, model, options}``). The hybrid's identity holds both
components' identities and the fusion parameters, so the config hash and the provenance
cover both components.

Each component builds and caches its own index under a key of the indexed texts' content
and its own identity, and each component's rankings (at ``depth``) go to the rankings
cache under keys that hold no fusion parameter: a sweep over ``alpha``, ``rrf_k`` or
``fusion`` reads the component rankings and only fuses.
"""

from __future__ import annotations

import difflib
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from typing import Any

from ragsweep import __version__
from ragsweep.cache.stage import StageCache
from ragsweep.config.app import config_dir
from ragsweep.config.schema import EmbeddingConfig, RetrievalConfig, from_mapping, read_yaml_mapping
from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import sha256_json, sha256_parts, source_digest
from ragsweep.index import fusion as fusion_module
from ragsweep.index.base import BACKENDS, Backend, Index, IndexProvenance, Query, Ranked
from ragsweep.index.encoding import ModelIdentity, options_for
from ragsweep.index.fusion import FUSIONS, FusionParams, fuse
from ragsweep.index.stages import cached_rankings, rankings_key

ROLES = ("sparse", "dense")
COMPONENT_RETRIEVAL = RetrievalConfig()
"""What a component rankings key holds of the retrieval config: nothing run-specific (the
scope masks are in the queries themselves)."""


@dataclass(frozen=True)
class HybridOptions:
    """``fusion``: ``rrf`` or ``score`` (see :mod:`ragsweep.index.fusion`); ``alpha``: weight of
    the dense component in [0, 1]; ``rrf_k``: RRF rank offset; ``depth``: chunks taken from
    each component's ranking; ``sparse`` / ``dense``: the components, each the name of an
    ``embedding`` option in ``conf/embedding/`` (``bm25``, ``use_m3``,
    ``sentence_transformers``, ...) or a mapping ``{backend, model, options}``. All of it
    changes rankings (through the components' identities)."""

    fusion: str = "rrf"
    alpha: float = 0.5
    rrf_k: float = 60.0
    depth: int = 100
    sparse: dict[str, Any] | str = "bm25"
    dense: dict[str, Any] | str = "use_m3"

    def __post_init__(self) -> None:
        FUSIONS.get(self.fusion)
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"embedding.options.alpha={self.alpha} must be in [0, 1]")
        if self.rrf_k <= 0:
            raise ConfigError(f"embedding.options.rrf_k={self.rrf_k} must be > 0")
        if self.depth < 1:
            raise ConfigError(f"embedding.options.depth={self.depth} must be >= 1")

    @property
    def params(self) -> FusionParams:
        return FusionParams(alpha=self.alpha, rrf_k=self.rrf_k)


def component_config(options: HybridOptions, role: str) -> EmbeddingConfig:
    """The embedding config of one component; errors name ``embedding.options.<role>``."""
    value = getattr(options, role)
    if isinstance(value, str):
        value = named_component(value, role)
    with component_errors(role):
        cfg = from_mapping(EmbeddingConfig, value, "embedding")
        BACKENDS.get(cfg.backend)
    if cfg.backend == "hybrid":
        raise ConfigError(f"embedding.options.{role}.backend cannot itself be hybrid")
    return cfg


def named_component(name: str, role: str) -> dict[str, Any]:
    """The ``conf/embedding/<name>.yaml`` option as a component mapping."""
    folder = config_dir() / "embedding"
    known = sorted(p.stem for p in folder.glob("*.yaml") if p.stem != "hybrid")
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"embedding.options.{role}={name!r} is not one of: {', '.join(known)}{hint}"
        )
    return read_yaml_mapping(folder / f"{name}.yaml", "an embedding config")


@contextmanager
def component_errors(role: str) -> Iterator[None]:
    """Re-raise a component's ConfigError with its keys under ``embedding.options.<role>``
    (``embedding.options.k1`` of the sparse side is ``embedding.options.sparse.options.k1``)."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("embedding.", f"embedding.options.{role}.")) from None


def hybrid_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    """Both components' identities and the fusion parameters."""
    options = options_for(HybridOptions, cfg)
    parts = {role: _component_identity(options, role) for role in ROLES}
    return ModelIdentity(
        backend="hybrid",
        name="+".join(f"{parts[role].backend}:{parts[role].name}" for role in ROLES),
        version=__version__,
        dimension=0,
        normalized=False,
        digest=sha256_json(parts),
        options={
            "fusion": options.fusion,
            "alpha": options.alpha,
            "rrf_k": options.rrf_k,
            "depth": options.depth,
            **{role: asdict(parts[role]) for role in ROLES},
        },
    )


def _component_identity(options: HybridOptions, role: str) -> ModelIdentity:
    component = component_config(options, role)
    with component_errors(role):
        return BACKENDS.get(component.backend).identity(component)


@dataclass
class Component:
    """One side of a hybrid: its backend, built index and that index's cache key."""

    backend: Backend
    index: Index
    key: str


@dataclass
class HybridIndex:
    """Searches both components (rankings cached per component) and fuses them.

    ``Ranked.seconds`` is the sum of the components' recorded search times and the fusion
    time; ``Ranked.stages`` splits it as ``sparse``, ``dense``, ``fusion``.
    """

    provenance: IndexProvenance
    options: HybridOptions
    components: dict[str, Component]
    cache: StageCache

    @property
    def query_model(self) -> ModelIdentity:
        return self.provenance.model

    def search(
        self, queries: Sequence[Query], top_k: int, query_preprocess: Mapping[str, Any]
    ) -> list[Ranked]:
        self.provenance.check_query_side(self.query_model, query_preprocess)
        sides = [self._component_rankings(role, queries, query_preprocess) for role in ROLES]
        return [self._fused(sparse, dense, top_k) for sparse, dense in zip(*sides, strict=True)]

    def _component_rankings(
        self, role: str, queries: Sequence[Query], query_preprocess: Mapping[str, Any]
    ) -> list[Ranked]:
        part, depth = self.components[role], self.options.depth
        key = rankings_key(part.key, queries, COMPONENT_RETRIEVAL, depth, part.backend)
        return cached_rankings(
            lambda: part.index,
            key,
            queries,
            query_preprocess,
            depth,
            lambda index: index.search(queries, depth, query_preprocess),
            self.cache,
        )

    def _fused(self, sparse: Ranked, dense: Ranked, top_k: int) -> Ranked:
        started = time.perf_counter()
        options = self.options
        indices, scores = fuse(sparse, dense, options.fusion, options.params, top_k)
        fused = time.perf_counter() - started
        stages = (("sparse", sparse.seconds), ("dense", dense.seconds), ("fusion", fused))
        return Ranked(indices, scores, sum(t for _, t in stages), stages)


def component_index_key(texts: Sequence[str], model: ModelIdentity, backend: Backend) -> str:
    """A component's index key: the indexed texts' content, its identity, the ragsweep
    version and its index code; fusion parameters are not in it."""
    return sha256_json(
        {
            "texts": sha256_parts(texts),
            "model": model,
            "ragsweep": __version__,
            "index_code": backend.index_code,
        }
    )


class HybridBackend:
    """The registered ``hybrid`` backend."""

    index_stage = "hybrid"  # stores nothing itself: each component caches its own index
    index_code = ""

    @cached_property
    def search_code(self) -> str:
        """Fusion shapes the fused rankings (each component's own code is in its key)."""
        return source_digest(fusion_module, sys.modules[__name__])

    def identity(self, cfg: EmbeddingConfig) -> ModelIdentity:
        return hybrid_identity(cfg)

    def cached_index(
        self,
        texts: Sequence[str],
        key: str,
        cfg: EmbeddingConfig,
        provenance: IndexProvenance,
        cache: StageCache,
    ) -> HybridIndex:
        del key  # the hybrid's key holds the fusion parameters; components key their own
        options = options_for(HybridOptions, cfg)
        components = {}
        for role in ROLES:
            component = component_config(options, role)
            backend = BACKENDS.get(component.backend)
            model = ModelIdentity(**provenance.model.options[role])
            part_key = component_index_key(texts, model, backend)
            part_provenance = replace(provenance, model=model)
            index = backend.cached_index(texts, part_key, component, part_provenance, cache)
            components[role] = Component(backend, index, part_key)
        return HybridIndex(provenance, options, components, cache)


BACKENDS.add("hybrid", HybridBackend())
