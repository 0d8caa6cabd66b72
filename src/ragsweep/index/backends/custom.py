"""The ``custom`` backend: a retriever class of your own, named by a Hydra ``_target_``.

``embedding=custom embedding.options._target_=mypkg.MyRetriever`` (any other key under
``embedding.options`` is passed to the constructor). The class implements
:class:`Retriever`; docs/retrieval.md shows one. Its identity is the target, the
constructor arguments and the instance's ``version`` string, so rankings are cached and
served again until ``version`` (or an argument) changes: bump it whenever a code change
changes results.

The retriever is built over the indexed chunk texts on the first search of a run; a run
whose rankings are all cached never builds it.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ragsweep.cache.stage import StageCache
from ragsweep.config.schema import EmbeddingConfig
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.core.hashing import source_digest
from ragsweep.index import base as index_module
from ragsweep.index.base import BACKENDS, IndexProvenance, Query, Ranked
from ragsweep.index.encoding import ModelIdentity

TARGET = "_target_"


@runtime_checkable
class Retriever(Protocol):
    """What a custom retriever implements.

    - ``version``: a string that changes whenever the retriever's results would (it is part
      of every cache key of its rankings);
    - ``build(texts)``: index the chunk texts (``texts[i]`` is chunk ``i``);
    - ``search(queries, top_k, allowed)``: for each query text, up to ``top_k``
      ``(chunk index, score)`` pairs, best first. ``allowed[j]`` is None or a boolean mask
      over the chunks: the chunks query ``j`` may return (its scope); chunks outside it
      are dropped from what is returned.
    """

    version: str

    def build(self, texts: Sequence[str]) -> None: ...

    def search(
        self, queries: Sequence[str], top_k: int, allowed: Sequence[np.ndarray | None]
    ) -> Sequence[Sequence[tuple[int, float]]]: ...


def instantiate(cfg: EmbeddingConfig) -> Retriever:
    """The retriever ``embedding.options`` names, checked against :class:`Retriever`."""
    options = dict(cfg.options)
    target = options.pop(TARGET, None)
    if not isinstance(target, str) or "." not in target:
        raise ConfigError(
            "embedding.options._target_ must name a retriever class as module.Class, "
            f"got {target!r}"
        )
    module_name, _, class_name = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"embedding.options._target_={target!r} cannot be imported: {exc}"
        ) from None
    try:
        retriever = cls(**options)
    except TypeError as exc:
        raise ConfigError(
            f"embedding.options: {target}(...) rejected its arguments: {exc}"
        ) from None
    missing = [name for name in ("version", "build", "search") if not hasattr(retriever, name)]
    if missing or not isinstance(retriever.version, str):
        raise ConfigError(
            f"embedding.options._target_={target!r} does not implement the retriever "
            f"protocol (needs a str version, build(texts), search(queries, top_k, allowed)); "
            f"missing or wrong: {', '.join(missing) or 'version is not a str'}"
        )
    return retriever


def custom_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    """Target, constructor arguments and the instance's ``version``."""
    retriever = instantiate(cfg)
    return ModelIdentity(
        backend="custom",
        name=str(cfg.options[TARGET]),
        version=retriever.version,
        dimension=0,
        normalized=False,
        options={k: v for k, v in cfg.options.items() if k != TARGET},
    )


@dataclass
class CustomIndex:
    """A user retriever behind the :class:`~ragsweep.index.base.Index` protocol.

    ``Ranked.seconds`` is the batch's ``search`` time divided by its number of queries.
    """

    provenance: IndexProvenance
    cfg: EmbeddingConfig
    texts: Sequence[str]
    build_seconds: float = field(default=0.0)

    @property
    def query_model(self) -> ModelIdentity:
        return self.provenance.model

    @cached_property
    def retriever(self) -> Retriever:
        retriever = instantiate(self.cfg)
        if retriever.version != self.provenance.model.version:
            raise BackendError(
                f"{self.provenance.model.name} reports version {retriever.version!r}, the "
                f"configuration resolved to {self.provenance.model.version!r}"
            )
        started = time.perf_counter()
        retriever.build(list(self.texts))
        self.build_seconds = time.perf_counter() - started
        return retriever

    def search(
        self, queries: Sequence[Query], top_k: int, query_preprocess: Mapping[str, Any]
    ) -> list[Ranked]:
        self.provenance.check_query_side(self.query_model, query_preprocess)
        retriever = self.retriever
        started = time.perf_counter()
        answers = retriever.search([q.text for q in queries], top_k, [q.allowed for q in queries])
        each = (time.perf_counter() - started) / max(1, len(queries))
        if len(answers) != len(queries):
            raise BackendError(
                f"{self.provenance.model.name}.search returned {len(answers)} rankings for "
                f"{len(queries)} queries"
            )
        return [self._checked(a, q, top_k, each) for a, q in zip(answers, queries, strict=True)]

    def _checked(
        self, answer: Sequence[tuple[int, float]], query: Query, top_k: int, seconds: float
    ) -> Ranked:
        """The answer as a Ranked: indices in range and distinct, scope applied, cut at k."""
        pairs = [(int(i), float(s)) for i, s in answer]
        indices = [i for i, _ in pairs]
        n_chunks = self.provenance.n_chunks
        if any(not 0 <= i < n_chunks for i in indices) or len(set(indices)) != len(indices):
            raise BackendError(
                f"{self.provenance.model.name}.search returned chunk indices outside "
                f"0..{n_chunks - 1} or repeated: {indices[:10]}"
            )
        if query.allowed is not None:
            pairs = [(i, s) for i, s in pairs if query.allowed[i]]
        pairs = pairs[:top_k]
        return Ranked(
            np.array([i for i, _ in pairs], dtype=np.int64),
            np.array([s for _, s in pairs], dtype=np.float32),
            seconds,
        )


class CustomBackend:
    """The registered ``custom`` backend. Its stored state is nothing: the retriever is
    rebuilt when rankings are not cached; its ``version`` is in every key."""

    index_stage = "custom"
    index_code = ""

    @cached_property
    def search_code(self) -> str:
        """This adapter and top-k handling shape rankings; the retriever's own code is
        covered by its ``version``."""
        return source_digest(sys.modules[__name__], index_module)

    def identity(self, cfg: EmbeddingConfig) -> ModelIdentity:
        return custom_identity(cfg)

    def cached_index(
        self,
        texts: Sequence[str],
        key: str,
        cfg: EmbeddingConfig,
        provenance: IndexProvenance,
        cache: StageCache,
    ) -> CustomIndex:
        del key, cache
        return CustomIndex(provenance, cfg, texts)


BACKENDS.add("custom", CustomBackend())
