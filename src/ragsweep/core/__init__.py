"""Foundations every stage uses: errors, hashing, atomic writes, disk errors, the one lock
helper, registries, terminal output, and the vocabularies several stages share (names, tags).

Imports nothing of ragsweep outside this package (docs/architecture.md).
"""
