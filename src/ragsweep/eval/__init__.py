"""Scoring: when a chunk finds an evidence span, the measures, context budgets, intervals,
paired statistics and the per-case results of a run.

Imports :mod:`ragsweep.index` and below (docs/architecture.md).
"""
