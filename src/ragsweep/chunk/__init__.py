"""Chunking: the registered chunkers and the chunk table a run's chunks live in.

Imports :mod:`ragsweep.data` and below (docs/architecture.md).
"""
