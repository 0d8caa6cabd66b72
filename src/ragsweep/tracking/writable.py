"""The local tracking store must be writable before any work starts.

MLflow opens a SQLite store read-only as far as its first query goes, so a store file that
is immutable (``chattr +i``), read-only or on a read-only file system was found only when
the run logged, after the whole evaluation, with MLflow's own traceback text. This check
(a cheap file open, no MLflow) runs before a single run or a multirun does anything.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from ragsweep.config.schema import TrackingConfig
from ragsweep.tracking.store import TrackingStoreError, sqlite_path, tracking_uri


def check_writable(cfg: TrackingConfig) -> None:
    """Raise TrackingStoreError naming the file or folder and what to do when the local
    SQLite store of ``cfg`` (or the folder it will be created in) cannot be written.
    Servers and other stores are checked by :func:`~ragsweep.tracking.store.prepare_store`."""
    if not cfg.enabled:
        return
    uri = tracking_uri(cfg)
    path = sqlite_path(uri)
    if path is None:
        return
    if path.exists():
        _try(lambda: open(path, "r+b").close(), path, uri)
    folder = _existing_folder(path.parent)
    if folder == path.parent:
        _try(lambda: tempfile.TemporaryFile(dir=folder).close(), folder, uri)
    elif not os.access(folder, os.W_OK):
        _refuse(folder, uri, os.strerror(errno.EACCES))


def _existing_folder(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _try(action: Callable[[], None], where: Path, uri: str) -> None:
    try:
        action()
    except OSError as exc:
        _refuse(where, uri, exc.strerror or str(exc))


def _refuse(where: Path, uri: str, why: str) -> None:
    kind = "folder" if where.is_dir() else "file"
    raise TrackingStoreError(
        f"tracking store {uri}: the {kind} {where} cannot be written ({why}); nothing was run. "
        f"Make it writable (`lsattr {where}` shows an immutable flag: `chattr -i {where}`; "
        f"`chmod u+w {where}`; or a writable file system), or log elsewhere with "
        "tracking.uri=sqlite:///<a writable path>/mlflow.db"
    )
