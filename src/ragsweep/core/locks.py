"""File locks (``flock``) shared by every ragsweep process: the one helper the stage cache,
the tracking store and the background logger take their locks with.

A lock belongs to an open file, is released when the file is closed or its process ends
(the kernel drops it), and coordinates ragsweep processes only. Some file systems have no
working locks (an NFS mount without its lock service, Lustre mounted ``noflock``): there
:func:`acquire` raises :class:`NoLocks` and the caller decides what that costs.
"""

from __future__ import annotations

import errno
import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

POLL_SECONDS = 0.05
"""How often a bounded wait asks for the lock again."""

NO_LOCK_ERRNOS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS})
"""What ``flock`` raises on a file system with no working locks."""


class NoLocks(OSError):
    """The file system refuses ``flock`` altogether (see :data:`NO_LOCK_ERRNOS`)."""


class LockTimeout(TimeoutError):
    """Another process held the lock for longer than the caller would wait."""


def acquire(handle: IO[Any], *, shared: bool = False, wait_seconds: float | None = None) -> None:
    """Lock the open file ``handle``: exclusive unless ``shared``; block until it is free
    (``wait_seconds`` None) or for at most ``wait_seconds`` (then :class:`LockTimeout`)."""
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    deadline = None if wait_seconds is None else time.monotonic() + wait_seconds
    while True:
        try:
            fcntl.flock(handle, mode if deadline is None else mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if deadline is not None and time.monotonic() >= deadline:
                raise LockTimeout(f"lock held for over {wait_seconds} s") from None
            time.sleep(POLL_SECONDS)
        except OSError as exc:
            if exc.errno in NO_LOCK_ERRNOS:
                raise NoLocks(exc.errno, exc.strerror) from exc
            raise


def release(handle: IO[Any]) -> None:
    """Unlock ``handle`` (closing it does the same)."""
    fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def held(
    handle: IO[Any], *, shared: bool = False, wait_seconds: float | None = None
) -> Iterator[None]:
    """Hold the lock on ``handle`` for the block (see :func:`acquire`)."""
    acquire(handle, shared=shared, wait_seconds=wait_seconds)
    try:
        yield
    finally:
        release(handle)


def is_held(path: Path) -> bool | None:
    """Whether another process holds a lock on the file ``path`` now: asked with a shared,
    non-blocking lock (it conflicts with an exclusive holder, and NFS, which emulates
    ``flock`` with byte-range locks, refuses an exclusive one on a file opened for reading).
    None when that cannot be asked (no such file, no working locks)."""
    try:
        with path.open("rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    return False
