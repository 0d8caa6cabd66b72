"""Chunking: the chunkers and the chunk table a run's chunks live in."""
