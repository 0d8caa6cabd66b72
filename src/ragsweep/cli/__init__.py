"""Every entry point: the ``ragsweep`` command and its subcommands, the ``ragsweep-*``
scripts, and the Hydra callbacks ``conf/config.yaml`` names.

May import any package; nothing imports it (docs/architecture.md).
"""
