"""ragsweep's Hydra search path plugin: the project's config folders before the packaged
defaults (see :mod:`.searchpath`)."""
