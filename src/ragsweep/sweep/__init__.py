"""Sweeps: many configurations evaluated as one experiment (see docs/sweeps.md).

The Hydra sweeper plugin ``hydra_plugins.ragsweep_one_axis`` is a thin shim over
:mod:`.sweeper` (a sweep file, or a grid). A sweep file runs in :mod:`.engine` (the loop over
axes and decisions), which composes job configs (:mod:`.compose`), checks the axes
(:mod:`.checks`), launches jobs and records their outcome and failures (:mod:`.launch`,
into :mod:`.state`). Around it: the sweep-file model (:mod:`.spec`), what an axis' values
change (:mod:`.factors`), the choice of an axis' value (:mod:`.select`, :mod:`.paired`), the
result model (:mod:`.result`), the MLflow parent run and resume (:mod:`.runs`, with the run
descriptions of :mod:`.notes`) and the end-of-sweep table and plot (:mod:`.report`).
"""
