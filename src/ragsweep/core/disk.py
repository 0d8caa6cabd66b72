"""What a failed write says about the disk: a file system that refuses writes (read-only,
no permission) or one that is full (or over quota). The stage cache and the run directory's
atomic writes both tell these apart to name the folder and what to do.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

_READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
LOW_SPACE_BYTES = 1 << 20
"""Below this many free bytes, a write error without an errno counts as a full disk."""


def is_read_only_error(exc: OSError) -> bool:
    """True when ``exc`` says the file system or directory refuses writes."""
    return exc.errno in _READ_ONLY_ERRNOS


def is_out_of_space_error(exc: OSError, folder: Path) -> bool:
    """True when ``exc`` comes from a full disk (or quota) under ``folder``.

    numpy reports a short write as a plain ``OSError("62464 requested and 18400 written")``
    without an errno, so a plain OSError without one counts when ``folder``'s file system
    has less than :data:`LOW_SPACE_BYTES` free.
    """
    if exc.errno in _NO_SPACE_ERRNOS:
        return True
    return type(exc) is OSError and exc.errno is None and free_bytes(folder) < LOW_SPACE_BYTES


def free_bytes(path: Path) -> int:
    """Bytes available to this user on the file system holding ``path`` (or its nearest
    existing parent); a very large number when that cannot be told."""
    for candidate in (path, *path.parents):
        try:
            info = os.statvfs(candidate)
        except OSError:
            continue
        return info.f_bavail * info.f_frsize
    return 1 << 62
