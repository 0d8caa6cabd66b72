"""Everything that talks to MLflow: the store, logging a run, the one background logger (for
a single run and for a sweep's runs), pending markers, stored artifacts and tables.

Imports :mod:`ragsweep.eval` and below, never :mod:`ragsweep.judge` (docs/architecture.md).
"""
