"""One evaluation: the resolved config, the pipeline, the run directory's files, its record,
name, notes, metrics, report and chart.

Imports :mod:`ragsweep.judge`, :mod:`ragsweep.tracking` and below (docs/architecture.md).
"""
