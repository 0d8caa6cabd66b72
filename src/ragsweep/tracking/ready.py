"""Whether a run may leave opening its MLflow store to a logger process, told without
importing MLflow (issue 31): the store exists at the installed MLflow's schema, holds the
run's experiment, and nothing the run's process could refuse before its work is left but
what the logger's own opening of the store finds. A store that is not known to be ready is
checked, created, migrated or refused in the run's own process before any work
(:func:`ragsweep.tracking.store.prepare_store`).

- A SQLite file is read with ``sqlite3`` (:func:`store_is_ready`: only such a file is logged
  in a detached background logger, whose markers live beside it).
- A tracking server is asked with ``requests`` (:mod:`ragsweep.tracking.server`): its
  health, then the experiment; one that does not answer is refused here, before any work.

Other stores (a file store, a database server) are never left to a logger before MLflow has
opened them in the run's process.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from urllib.parse import urlparse

from ragsweep.tracking import server
from ragsweep.tracking.schema_head import mlflow_schema_head
from ragsweep.tracking.server import ACTIVE_STAGE, HEALTH_TIMEOUT_SECONDS
from ragsweep.tracking.store import SQLITE_TIMEOUT_SECONDS, read_sqlite_state, sqlite_path

NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "gpfs"}
    | {"fuse.sshfs", "fuse.glusterfs", "fuse.ceph", "beegfs"}
)
"""File-system types (``/proc/self/mountinfo``) on which Linux emulates ``flock`` with
per-process locks that a child does not inherit; a store on one logs in the run's own
process."""
MOUNTINFO = Path("/proc/self/mountinfo")


def filesystem_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The type of the file system holding ``path`` (the mount with the longest mount point
    above it in ``mountinfo``, this process's ``/proc/self/mountinfo`` by default); None
    where that cannot be read (not Linux)."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text(encoding="utf-8")
        except OSError:
            return None
    target = path.resolve()
    best: tuple[int, str] | None = None
    for line in mountinfo.split("\n"):
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        point = Path(parts[4].replace("\\040", " "))
        if (target == point or point in target.parents) and (
            best is None or len(point.parts) > best[0]
        ):
            best = (len(point.parts), rest.split()[0])
    return None if best is None else best[1]


def store_is_ready(uri: str) -> bool:
    """True when ``uri`` is a local SQLite file that exists with a complete schema at the
    installed MLflow's head revision (read with ``sqlite3``, without MLflow; an older or
    newer store is migrated or refused in-process, before any work): the only store a run
    hands to a logger, so a store to create, migrate, repair or reach over the network is
    still checked before any work, in the run's own process."""
    path = sqlite_path(uri)
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return False
    if filesystem_type(path) in NETWORK_FILESYSTEMS:
        return False  # flock there is per process, not inherited: markers would not hold
    try:
        state = read_sqlite_state(path)
    except Exception:  # unreadable: the in-process check reports it properly
        return False
    head = mlflow_schema_head()
    return (
        head is not None
        and state.version == head
        and not state.problems()
        and "experiments" in state.tables
    )


def _sqlite_experiment_ready(uri: str, experiment: str, timeout: float) -> bool:
    """:func:`store_is_ready` and the SQLite store holds ``experiment``, not deleted (read
    with ``sqlite3``; ``timeout``: not a network store, the lock wait is the usual one)."""
    path = sqlite_path(uri)
    if path is None or not store_is_ready(uri):
        return False
    query = "SELECT lifecycle_stage FROM experiments WHERE name = ?"
    try:
        read_only = f"{path.resolve().as_uri()}?mode=ro"
        with closing(sqlite3.connect(read_only, uri=True, timeout=SQLITE_TIMEOUT_SECONDS)) as db:
            row = db.execute(query, (experiment,)).fetchone()
    except sqlite3.Error:  # the in-process check reports it properly
        return False
    return row is not None and row[0] == ACTIVE_STAGE


READY_CHECKS: dict[str, Callable[[str, str, float], bool]] = {
    "sqlite": _sqlite_experiment_ready,
    "http": server.experiment_ready,
    "https": server.experiment_ready,
}
"""URI scheme → whether a store of that kind holds the experiment and may be left to a
logger (``(uri, experiment, timeout)``); other schemes never are."""


def experiment_is_ready(uri: str, experiment: str, timeout: float = HEALTH_TIMEOUT_SECONDS) -> bool:
    """True when the store ``uri`` holds ``experiment``, active, and is ready (module
    docstring): then opening the store is all that is left to do before logging, and a
    logger process can do it while the run computes. Raises TrackingStoreError when the
    store is a tracking server that does not answer within ``timeout`` seconds."""
    check = READY_CHECKS.get(urlparse(uri).scheme)
    return check is not None and check(uri, experiment, timeout)
