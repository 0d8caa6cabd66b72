"""Retrieval backends, registered by name in :data:`BACKENDS`: ``bm25`` (sparse, bm25s),
``use_m3`` (dense, offline), ``sentence_transformers`` (dense, any local sentence-transformers
model; extra ``ragsweep[st]``), ``ollama`` / ``openai`` (dense, served over HTTP) and
``hybrid`` (a sparse and a dense backend, rankings fused), ``custom`` (a retriever
class of your own, :class:`ragsweep.index.backends.custom.Retriever`) and ``external`` (rankings
produced by another system, read from a file); ``ann`` searches a dense backend's vectors
approximately (faiss HNSW; extra ``ragsweep[ann]``).

Importing this package registers them (each module adds itself to the registry); nothing
else happens on import: models load on the first embedding miss, servers are contacted when
an identity is resolved.
"""

from __future__ import annotations

from ragsweep.index.backends import ann, bm25, custom, external, hybrid, sbert, served, use_m3
from ragsweep.index.base import BACKENDS, Backend

__all__ = [
    "BACKENDS",
    "Backend",
    "ann",
    "bm25",
    "custom",
    "external",
    "hybrid",
    "sbert",
    "served",
    "use_m3",
]
