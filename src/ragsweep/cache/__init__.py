"""The content-addressed stage cache (entries keyed by config hashes and code digests,
written atomically, verified on read) and the embedding store.

Imports only :mod:`ragsweep.config` and :mod:`ragsweep.core` (docs/architecture.md).
"""
