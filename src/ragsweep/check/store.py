"""Is the tracking store reachable? A short, self-contained probe per URI scheme, for
``ragsweep check``: nothing is created, no MLflow client is opened, every network call is
bounded by :data:`TIMEOUT_S`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from urllib.parse import urlparse

import requests

TIMEOUT_S = 3.0
"""Seconds a probe waits for a store to connect and to answer."""


class StoreProblem(Exception):
    """The store cannot be used; the message says why."""


def _writable_folder(path: Path) -> str:
    """How ``path`` (a file or folder that may not exist yet) would be created."""
    ancestor = path
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise StoreProblem(f"{path} cannot be created: {ancestor} is not a writable folder")
    return f"{path} will be created (first run)"


def probe_sqlite(uri: str) -> str:
    """An SQLite store: the file opens read-only as a database, or can be created."""
    path = Path(uri.removeprefix("sqlite:///"))
    if not path.exists():
        return _writable_folder(path)
    try:
        read_only = f"{path.resolve().as_uri()}?mode=ro"
        with closing(sqlite3.connect(read_only, uri=True, timeout=TIMEOUT_S)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            if "experiments" not in tables:
                return f"{path}: an SQLite database without MLflow tables (MLflow adds them)"
            (count,) = db.execute("SELECT COUNT(*) FROM experiments").fetchone()
    except sqlite3.Error as exc:
        raise StoreProblem(f"{path} is not a usable SQLite database ({exc})") from None
    return f"{path}: MLflow store with {count} experiment(s)"


def probe_http(uri: str) -> str:
    """A tracking server: ``GET <uri>/health`` answers 200 within the timeout."""
    url = uri.rstrip("/") + "/health"
    try:
        response = requests.get(url, timeout=(TIMEOUT_S, TIMEOUT_S))
    except requests.RequestException as exc:
        raise StoreProblem(
            f"{uri}: no tracking server answered within {TIMEOUT_S:g} s "
            f"({type(exc).__name__}); start it, or set tracking.uri / MLFLOW_TRACKING_URI"
        ) from None
    if response.status_code != 200:
        raise StoreProblem(f"{url} answered HTTP {response.status_code}, not an MLflow server?")
    return f"{uri}: tracking server answers"


def probe_file(uri: str) -> str:
    """A file store (``file://`` or a plain path): its folder exists or can be created."""
    path = Path(urlparse(uri).path if uri.startswith("file:") else uri)
    return f"{path}: file store" if path.is_dir() else _writable_folder(path)


PROBES: dict[str, Callable[[str], str]] = {
    "sqlite": probe_sqlite,
    "http": probe_http,
    "https": probe_http,
    "file": probe_file,
    "": probe_file,
}
"""URI scheme → probe returning a one-line description or raising StoreProblem."""


def probe(uri: str) -> str:
    """Probe the store at ``uri``; schemes without a probe are reported as not checked."""
    scheme = urlparse(uri).scheme
    if scheme not in PROBES:
        return f"{uri}: not checked (no probe for {scheme}:// stores)"
    return PROBES[scheme](uri)
