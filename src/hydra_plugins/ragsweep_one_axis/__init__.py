"""ragsweep's Hydra sweeper plugin: ``hydra/sweeper=one_axis`` (see docs/sweeps.md)."""
