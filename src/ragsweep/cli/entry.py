"""The ``ragsweep`` console script's entry module: Ctrl-C while Python is still importing
ragsweep and its libraries (the first seconds of every command) prints one line and exits
130, instead of a ``KeyboardInterrupt`` traceback from deep inside some library's import.

The console script runs ``from ragsweep.cli.entry import main``. This module imports the
CLI (:mod:`ragsweep.cli.main`) at its top, as every module does, inside a ``try``: an
interrupt during that import ends the process here, before anything was read or written.
On any other import it only binds ``main``. Once ``main`` runs, it handles Ctrl-C itself
(one line, exit 130: docs/sweeps.md). The other ``ragsweep-*`` scripts start from their own
modules and do not have this.
"""

from __future__ import annotations

import sys

from ragsweep.core.interrupts import INTERRUPTED_STATUS, ignore_interrupts

INTERRUPTED_START = "interrupted while starting; nothing was done"

try:
    from ragsweep.cli.main import main
except KeyboardInterrupt:
    ignore_interrupts()  # a second Ctrl-C must not cut this line off either
    print(INTERRUPTED_START, file=sys.stderr)
    sys.exit(INTERRUPTED_STATUS)

__all__ = ["main"]
