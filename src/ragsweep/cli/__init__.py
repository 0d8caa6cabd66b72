"""Every entry point: the ragsweep command, its subcommands and the ragsweep-* scripts, and the Hydra callbacks."""
