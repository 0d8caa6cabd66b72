"""Sweeps: many configurations evaluated as one experiment (see docs/sweeps.md).

The one-axis-at-a-time Hydra sweeper (``hydra_plugins.ragsweep_one_axis``) is the driver;
this package holds what it is built from: the sweep-file model (:mod:`.spec`), the choice
of an axis' value (:mod:`.select`), the result model (:mod:`.result`), the MLflow parent
run and resume lookup (:mod:`.runs`) and the end-of-sweep table and plot (:mod:`.report`).
"""
