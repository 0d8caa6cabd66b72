"""Indexing and retrieval: the index and backend protocols, the backends, served models,
fusion, reranking and the cached build stages.

Imports :mod:`ragsweep.chunk` and below (docs/architecture.md).
"""
