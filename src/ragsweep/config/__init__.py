"""The typed, frozen config dataclasses (their field metadata is what config hashes are made
of) and how the Hydra app finds and composes its config.

Imports only :mod:`ragsweep.core` (docs/architecture.md).
"""
