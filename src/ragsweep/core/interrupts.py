"""Ctrl-C while ragsweep finishes: what it is doing then must not be cut off.

A sweep interrupted once records its state (parent run KILLED, results written); a second
Ctrl-C landing while it does so used to cut that off and leave the parent RUNNING, which
then refuses a resume from another machine. :func:`uninterrupted` ignores SIGINT (and
SIGTERM) for the duration of a block and restores the handlers after it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

INTERRUPTED_STATUS = 130
"""Exit status after Ctrl-C (128 + SIGINT), as a shell reports it."""
SHIELDED = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def uninterrupted() -> Iterator[None]:
    """Run the block with SIGINT and SIGTERM ignored (main thread only; elsewhere signals
    are not delivered to the thread anyway)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in SHIELDED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def ignore_interrupts() -> None:
    """Ignore further SIGINT/SIGTERM for the rest of the process (it is ending)."""
    if threading.current_thread() is threading.main_thread():
        for sig in SHIELDED:
            signal.signal(sig, signal.SIG_IGN)
