"""Release tooling on top of logged runs: promotion of a tuning run to the holdout split,
paired run comparison, the thresholds file and its ratchet, the quality gate and the nightly
record. The MLflow store is the record every tool reads; see docs/promotion.md.

One concern per module: :mod:`store` (reading runs), :mod:`promote`, :mod:`compare` (with
the paired test of :mod:`ragsweep.eval.stats`), :mod:`thresholds`, :mod:`gate`, :mod:`nightly`,
and the console scripts in :mod:`ragsweep.cli.release`.
"""
