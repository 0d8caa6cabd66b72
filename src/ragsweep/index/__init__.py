"""Indexing and retrieval: backends, served models, fusion, reranking and the cached build stages."""
