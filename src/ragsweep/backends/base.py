"""What every retrieval backend is: a model identity, options, and its own index.

A backend is named by ``embedding.backend`` and looked up in :data:`BACKENDS`. It declares
its options as a frozen dataclass (validated from ``embedding.options``; field metadata
says which options affect results) and a :class:`~ragsweep.encoding.ModelIdentity`:
everything that determines the vectors or scores it produces. The identity is recorded in
every index and checked on the query side, so an index is never searched with queries
encoded by another model, version or dimension. Each backend builds, caches and loads its own index
(:meth:`Backend.cached_index`), so the pipeline never branches on a backend's kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ragsweep.config import EmbeddingConfig
from ragsweep.encoding import ModelIdentity
from ragsweep.registry import Registry

if TYPE_CHECKING:
    from ragsweep.cache import StageCache
    from ragsweep.index import Index, IndexProvenance


class Backend(Protocol):
    """A registered backend.

    ``index_code`` is a digest of the code that shapes its stored index (part of the index
    key), ``search_code`` one of the code that turns index and queries into rankings (part
    of the rankings key).
    """

    @property
    def index_stage(self) -> str:
        """The cache stage its indexes are stored under (``bm25_index``, ``dense_index``)."""
        ...

    @property
    def index_code(self) -> str: ...

    @property
    def search_code(self) -> str: ...

    def identity(self, cfg: EmbeddingConfig) -> ModelIdentity:
        """The identity of the model ``cfg`` names, without loading it."""
        ...

    def cached_index(
        self,
        texts: Sequence[str],
        key: str,
        cfg: EmbeddingConfig,
        provenance: IndexProvenance,
        cache: StageCache,
    ) -> Index:
        """The index over ``texts`` under ``key``, built on a miss; its stored provenance
        must equal ``provenance``."""
        ...


BACKENDS: Registry[Backend] = Registry("embedding.backend")
"""A backend may also define ``own_chunks(cfg, corpus) -> list[Chunk]`` when its chunks
are not cut by ``chunking`` but come with it (``external``: another system's chunks)."""
