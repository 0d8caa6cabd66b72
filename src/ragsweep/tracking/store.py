"""The MLflow store behind ``tracking.uri``: checked, created and repaired before any work.

MLflow 3.17 has three faults this module works around (docs/tracking.md, "What happens
when..."):

- **SQLite, created or migrated by several processes at once.** ``SqlAlchemyStore`` runs the
  schema migrations (alembic) when a process first opens a new or older store, without any
  lock between processes: two processes doing it together crash, and the crash can leave the
  file half-migrated (leftover ``_alembic_tmp_*`` tables, or tables without a schema version)
  so that every later open fails too. ragsweep opens a local store only under an exclusive
  ``flock`` on a lock file beside it (``mlflow.db.store.lock``), and repairs a half-created
  store first, or reports what to do when repairing could lose runs.
- **A tracking server that is down or hangs.** MLflow's HTTP client waits 120 s per request
  and retries 7 times. ``tracking.timeout`` and ``tracking.retries`` set MLflow's own
  ``MLFLOW_HTTP_REQUEST_TIMEOUT`` and ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` for the process,
  and :func:`prepare_store` asks the server once, before any work.
- **Any failure** becomes a :class:`TrackingStoreError` naming the URI and what to do.

A process that first opens a store waits for the store's background logs still running and
reports the failed ones (:func:`wait_for_pending`; the markers are
:mod:`ragsweep.tracking.pending`).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlparse

from ragsweep.config.schema import TrackingConfig
from ragsweep.core import locks
from ragsweep.core import tags as tag
from ragsweep.core.errors import ConfigError, RagsweepError
from ragsweep.tracking import pending
from ragsweep.tracking.pending import Failed

LOCK_WAIT_SECONDS = 600.0
"""How long a process waits for another one to finish creating or migrating a local store
(creating a new SQLite store takes about 5 s on a 2-core machine)."""
SQLITE_TIMEOUT_SECONDS = 30.0
"""How long ragsweep's own SQLite reads wait for a write lock held by another process."""
BACKOFF_FACTOR = 1
"""Seconds; MLflow's HTTP retries sleep ``BACKOFF_FACTOR × 2^(n-1)`` before retry n > 1."""
TMP_PREFIX = "_alembic_tmp_"
DATA_TABLES = ("runs", "registered_models", "logged_models", "trace_info")
"""Tables whose rows would be lost if a broken store were set aside and created again."""
REASON_CHARS = 400


class TrackingStoreError(RagsweepError):
    """The tracking store cannot be reached, created or used (names the URI)."""


def tracking_uri(cfg: TrackingConfig) -> str:
    """``tracking.uri``, else ``MLFLOW_TRACKING_URI``, else the local SQLite store."""
    if cfg.uri:
        return cfg.uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    if not cfg.default_db:
        raise ConfigError("tracking.default_db is empty and no tracking.uri is set")
    return "sqlite:///" + str(Path(cfg.default_db).resolve())


def artifact_location(cfg: TrackingConfig, uri: str) -> str | None:
    """Where a new experiment on the store ``uri`` keeps its artifacts (None: the store's
    default). ``tracking.default_artifacts`` is a folder on this machine, so it applies only
    where this process writes the artifacts itself: a tracking server chooses the location
    (with ``--artifacts-destination``, artifacts go over HTTP to the server), otherwise every
    worker would write them to its own disk (docs/deploy.md)."""
    if cfg.artifact_location:
        return cfg.artifact_location
    if cfg.default_artifacts and kind_of(uri).local_artifacts:
        return Path(cfg.default_artifacts).resolve().as_uri()
    return None


HTTP_SETTINGS_ENV = (
    "MLFLOW_HTTP_REQUEST_TIMEOUT",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
)
"""MLflow's variables :func:`apply_http_settings` sets: ``tracking.timeout``,
``tracking.retries`` and :data:`BACKOFF_FACTOR`."""


def apply_http_settings(cfg: TrackingConfig) -> None:
    """Bound every request of this process to a tracking server: MLflow reads these
    environment variables at each request (``mlflow.utils.rest_utils``)."""
    values = (cfg.timeout, cfg.retries, BACKOFF_FACTOR)
    os.environ.update({name: str(v) for name, v in zip(HTTP_SETTINGS_ENV, values, strict=True)})


# --- SQLite: detect and repair a half-created store ---------------------------------------


@dataclass(frozen=True)
class SqliteState:
    """What a SQLite file holds: its tables, the alembic schema version (None: none
    recorded) and whether any table in ``DATA_TABLES`` has a row."""

    tables: frozenset[str]
    version: str | None
    holds_data: bool

    def leftovers(self) -> list[str]:
        """``_alembic_tmp_*`` tables: copies an interrupted migration did not finish."""
        return sorted(t for t in self.tables if t.startswith(TMP_PREFIX))

    def problems(self) -> list[str]:
        """Why MLflow cannot open the store (empty when it can, as far as ragsweep knows)."""
        found = [f"leftover table {t}" for t in self.leftovers()]
        if self.tables and self.version is None:
            found.append("tables without a schema version (alembic_version)")
        return found


def read_sqlite_state(path: Path) -> SqliteState:
    """The tables, schema version and data of the SQLite file ``path``."""
    with closing(sqlite3.connect(path, timeout=SQLITE_TIMEOUT_SECONDS)) as db:
        tables = frozenset(
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        )
        version = None
        if "alembic_version" in tables:
            row = db.execute("SELECT version_num FROM alembic_version").fetchone()
            version = row[0] if row else None
        present = [t for t in DATA_TABLES if t in tables]
        holds_data = any(db.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone() for t in present)
    return SqliteState(tables, version, holds_data)


def repair_sqlite(uri: str) -> list[str]:
    """Make a half-created SQLite store openable, or raise TrackingStoreError saying what to
    do. Call with the store lock held. Returns notes on what was repaired.

    - A store that holds no runs (nothing to lose) is moved aside (``<db>.broken-<time>``)
      and created again by MLflow.
    - Otherwise a leftover ``_alembic_tmp_X`` is dropped when ``X`` still exists (``X`` holds
      the rows; the copy was never swapped in), and MLflow resumes the migration from the
      recorded version. A leftover whose ``X`` is gone holds the only copy of ``X``'s rows,
      and a store without a schema version cannot be migrated: both are reported.
    """
    path = sqlite_path(uri)
    if path is None:
        return []
    path.parent.mkdir(parents=True, exist_ok=True)  # OSError: reported by the caller
    if not path.is_file() or path.stat().st_size == 0:
        return []
    try:
        state = read_sqlite_state(path)
    except sqlite3.DatabaseError as exc:
        raise TrackingStoreError(f"{path} is not a readable SQLite database ({exc})") from None
    problems = state.problems()
    if not problems:
        return []
    if not state.holds_data:
        backup = _set_aside(path)
        return [
            f"the MLflow store {path} was left half-created by an interrupted schema setup "
            f"({'; '.join(problems)}); it held no runs, so it was moved to {backup} and "
            "created again"
        ]
    return _repair_populated(path, state, problems)


def _repair_populated(path: Path, state: SqliteState, problems: list[str]) -> list[str]:
    orphans = [t for t in state.leftovers() if t.removeprefix(TMP_PREFIX) not in state.tables]
    if orphans:
        table = orphans[0].removeprefix(TMP_PREFIX)
        raise TrackingStoreError(
            f"the MLflow store {path} holds runs but a schema migration was cut off after "
            f"dropping table {table}: its rows are only in {orphans[0]}. Restore a backup of "
            f"{path}, or back it up and rename that table back (sqlite3 {path} "
            f"'ALTER TABLE {orphans[0]} RENAME TO {table}') before `mlflow db upgrade`"
        )
    if state.version is None:
        raise TrackingStoreError(
            f"the MLflow store {path} holds runs but has no schema version (alembic_version), "
            "so MLflow cannot tell which migrations ran: restore a backup, or move the file "
            "away to start a new store"
        )
    with closing(sqlite3.connect(path, timeout=SQLITE_TIMEOUT_SECONDS)) as db:
        for table in state.leftovers():
            db.execute(f'DROP TABLE "{table}"')
        db.commit()
    return [
        f"the MLflow store {path} had {'; '.join(problems)} from an interrupted schema "
        "migration; dropped them (the original tables hold the rows)"
    ]


def _set_aside(path: Path) -> Path:
    """Rename ``path`` (and its journal files) to ``<path>.broken-<time>``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.broken-{stamp}-{os.getpid()}")
    for suffix in ("", "-journal", "-wal", "-shm"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            companion.rename(backup.with_name(backup.name + suffix))
    return backup


# --- kinds of store -----------------------------------------------------------------------


@dataclass(frozen=True)
class StoreKind:
    """How ragsweep treats one kind of store, chosen by the URI's scheme.

    ``lock_file(uri, purpose)``: the file locked across processes for ``purpose``
    (``store``, ``sweeps``), None for a remote store (no lock, see docs/tracking.md);
    ``repair``: makes a local store openable by MLflow and returns notes for the user;
    ``advice``: what to do when the store fails; ``local_artifacts``: whether this process
    writes a new experiment's artifacts itself (so ``tracking.default_artifacts`` applies)
    rather than a tracking server choosing where they go.
    """

    lock_file: Callable[[str, str], Path | None]
    repair: Callable[[str], list[str]]
    advice: Callable[[str, TrackingConfig], str]
    local_artifacts: bool = True


def _no_lock(uri: str, purpose: str) -> Path | None:
    return None


def _no_repair(uri: str) -> list[str]:
    return []


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for an in-memory database)."""
    path = uri.removeprefix("sqlite:///") if uri.startswith("sqlite:///") else ""
    return Path(path) if path and path != ":memory:" else None


def _sqlite_lock(uri: str, purpose: str) -> Path | None:
    """Beside the database file: ``mlflow.db.<purpose>.lock``."""
    path = sqlite_path(uri)
    return None if path is None else path.with_name(f"{path.name}.{purpose}.lock")


def _file_store_lock(uri: str, purpose: str) -> Path | None:
    """Inside a file store's folder: ``.ragsweep.<purpose>.lock``."""
    return Path(urlparse(uri).path) / f".ragsweep.{purpose}.lock"


def _server_advice(uri: str, cfg: TrackingConfig) -> str:
    return (
        f"is the server running and is tracking.uri right? Each request waited at most "
        f"tracking.timeout={cfg.timeout} s and was retried tracking.retries={cfg.retries} "
        "time(s); run with tracking.enabled=false to evaluate without logging"
    )


def _sqlite_advice(uri: str, cfg: TrackingConfig) -> str:
    return (
        f"check that {sqlite_path(uri)} is a writable MLflow SQLite store (take a backup, "
        f"then `mlflow db upgrade {uri}` migrates an old one), or set tracking.uri elsewhere"
    )


def _generic_advice(uri: str, cfg: TrackingConfig) -> str:
    return "check tracking.uri (or MLFLOW_TRACKING_URI), or run with tracking.enabled=false"


SERVER = StoreKind(_no_lock, _no_repair, _server_advice, local_artifacts=False)
FILE_STORE = StoreKind(_file_store_lock, _no_repair, _generic_advice)
STORE_KINDS: dict[str, StoreKind] = {
    "sqlite": StoreKind(_sqlite_lock, repair_sqlite, _sqlite_advice),
    "http": SERVER,
    "https": SERVER,
    "file": FILE_STORE,
    "": FILE_STORE,  # a plain path is a file store for MLflow
}
"""URI scheme → kind; other schemes (postgresql, mysql, databricks, ...) are remote stores."""
REMOTE = StoreKind(_no_lock, _no_repair, _generic_advice)


def kind_of(uri: str) -> StoreKind:
    """The kind of store ``uri`` names (by its scheme)."""
    return STORE_KINDS.get(urlparse(uri).scheme, REMOTE)


def is_local(uri: str) -> bool:
    """Whether ``uri`` is a store on this machine (SQLite, a file store): no request
    timeout applies to writing it."""
    return kind_of(uri).lock_file(uri, "store") is not None


def lock_file(uri: str, purpose: str) -> Path | None:
    """The lock file of a local store for ``purpose`` (``store``, ``sweeps``), or None."""
    return kind_of(uri).lock_file(uri, purpose)


@contextmanager
def exclusive_lock(path: Path | None, wait_seconds: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (None: no lock) for the block, waiting at most
    ``wait_seconds`` for other processes. The kernel releases it when a holder dies."""
    if path is None:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a")
    except OSError as exc:
        raise TrackingStoreError(f"cannot create the lock file {path}: {exc}") from None
    with handle:
        try:
            locks.acquire(handle, wait_seconds=wait_seconds)
        except locks.LockTimeout:
            raise TrackingStoreError(
                f"waited {wait_seconds:.0f} s for the lock {path}, held by another "
                "ragsweep process that is creating or migrating the store (the lock ends "
                f"with its process; `fuser -v {path}` shows which one)"
            ) from None
        try:
            yield
        finally:
            locks.release(handle)


# --- background logs of the store ---------------------------------------------------------


def pending_dir(uri: str) -> Path | None:
    """Where the pending markers of store ``uri`` live (a SQLite store only):
    ``<db>.pending/`` beside the database file."""
    path = sqlite_path(uri)
    return None if path is None else path.with_name(f"{path.name}.pending")


_WAITED: set[str] = set()
"""Stores this process has waited for (once per process: later logs are its own)."""


def skip_waiting(uri: str) -> None:
    """Never wait in this process for ``uri``'s pending logs (a logger: two of them waiting
    for each other would wait forever)."""
    _WAITED.add(uri)


def wait_for_pending(
    uri: str, stream: TextIO | None = None, wait_seconds: float = LOCK_WAIT_SECONDS
) -> list[Failed]:
    """Wait until no background log to ``uri`` is running (the first time this process
    asks), saying so on ``stream`` (stderr); report each failed one there and return them."""
    if uri in _WAITED:
        return []
    _WAITED.add(uri)
    folder = pending_dir(uri)
    if folder is None or not folder.is_dir():
        return []
    try:
        pending.wait_running(folder, wait_seconds, stream)
    except locks.LockTimeout as exc:
        raise TrackingStoreError(str(exc)) from None
    return pending.report_failed(folder, stream)


def report_failed(uri: str, stream: TextIO | None = None) -> list[Failed]:
    """Report on ``stream`` (stderr) every background log to ``uri`` that ended without
    logging its run (those still running are not waited for); return them."""
    folder = pending_dir(uri)
    if folder is None or not folder.is_dir():
        return []
    return pending.report_failed(folder, stream)


def forget_pending(uri: str, record_id: str) -> None:
    """Remove what a background log of ``record_id`` to ``uri`` left
    (:func:`ragsweep.tracking.pending.forget`)."""
    folder = pending_dir(uri)
    if folder is not None:
        pending.forget(folder, record_id)


# --- opening and checking ----------------------------------------------------------------


@dataclass(frozen=True)
class ReadyStore:
    """A local store this process has opened at the current schema: checking, repairing and
    locking it again would find nothing to do (MLflow keeps one store object per URI for the
    process too). ``experiment_ids``: the experiments prepared in it, by name."""

    uri: str
    file: Path | None
    experiment_ids: dict[str, str]
    identity: tuple[int, int] | None = None
    """The file's ``(st_dev, st_ino)`` when it was opened."""

    def still_there(self) -> bool:
        """False when the store's file was removed or replaced since (then everything is
        checked again)."""
        return self.file is None or file_identity(self.file) == self.identity


_READY: dict[str, ReadyStore] = {}
"""Local stores opened by this process, by URI (sweep jobs in one process share them)."""


def file_identity(path: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of ``path``; None when there is none."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _ready(uri: str) -> ReadyStore | None:
    ready = _READY.get(uri)
    if ready is not None and not ready.still_there():
        del _READY[uri]
        _forget_opened(ready.file)
        return None
    return ready


MLFLOW_STORE_CACHES = (
    "mlflow.tracking._tracking_service.registry",  # TrackingStoreRegistry: store per URI
    "mlflow.store.tracking.sqlalchemy_store",  # SqlAlchemyStore._engine_map: engine per URI
)


def _forget_opened(file: Path | None) -> None:
    """Drop what MLflow keeps open on the SQLite ``file``, gone or replaced since this
    process opened it (a long-lived logger, :mod:`ragsweep.tracking.resident`): its pooled
    connections would go on writing into the deleted file, and every run logged there
    would be lost. The next client opens the file anew. Nothing to drop while MLflow's
    modules are not loaded (:data:`MLFLOW_STORE_CACHES`)."""
    registry, sqlalchemy_store = (sys.modules.get(name) for name in MLFLOW_STORE_CACHES)
    if registry is not None:
        registry.TrackingStoreRegistry._get_store_with_resolved_uri.cache_clear()
    if sqlalchemy_store is None or file is None:
        return
    engines = sqlalchemy_store.SqlAlchemyStore._engine_map
    for uri in [u for u in engines if sqlite_path(u) == file]:
        engines.pop(uri).dispose()


def forget_experiments() -> None:
    """Look every experiment up again at the next :func:`prepare_store` (a new session of
    the long-lived logger, :mod:`ragsweep.tracking.resident`): since this process found it,
    the experiment of a name may have been renamed (MLflow's UI) and another one created
    with the name, or deleted for good; the cached id would log runs into the wrong one."""
    for ready in _READY.values():
        ready.experiment_ids.clear()


def _mark_ready(uri: str, kind: StoreKind) -> ReadyStore:
    if not is_local(uri):  # a server or remote database: checked each time
        return ReadyStore(uri, None, {})
    path = sqlite_path(uri)
    ready = ReadyStore(uri, path, {}, None if path is None else file_identity(path))
    return _READY.setdefault(uri, ready)


def open_client(uri: str, cfg: TrackingConfig | None = None) -> Any:
    """An ``MlflowClient`` on ``uri``. A local store is repaired and opened (schema created
    or migrated by MLflow) under its store lock, so concurrent processes never migrate it
    at the same time; once this process has opened it, it is not checked again. Background
    logs of the store still running are waited for first. Raises TrackingStoreError naming
    the URI."""
    kind = kind_of(uri)
    if _ready(uri) is not None:
        return _client(uri, cfg)
    wait_for_pending(uri)  # not under the store lock: a logger needs it to open the store
    with exclusive_lock(lock_file(uri, "store")):
        client = _open_locked(uri, kind, cfg)
    _mark_ready(uri, kind)
    return client


PROGRESS_BAR_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
"""MLflow's "Downloading artifacts" bars: off unless stderr is a terminal (or the user set it)."""


def _client(uri: str, cfg: TrackingConfig | None) -> Any:
    from mlflow.tracking import MlflowClient

    if not sys.stderr.isatty():  # a pipe or a log file: no bar drawn line after line
        os.environ.setdefault(PROGRESS_BAR_ENV, "false")

    try:
        return MlflowClient(tracking_uri=uri)
    except Exception as exc:
        raise store_error(uri, cfg, "cannot be opened", exc) from None


def _open_locked(uri: str, kind: StoreKind, cfg: TrackingConfig | None) -> Any:
    try:
        for note in kind.repair(uri):
            print(f"note: {note}", file=sys.stderr)
    except TrackingStoreError:
        raise
    except Exception as exc:
        raise store_error(uri, cfg, "cannot be opened", exc) from None
    return _client(uri, cfg)


def prepare_store(cfg: TrackingConfig) -> str:
    """Check the store before any work, create it and the experiment; return the experiment
        id. The experiment is tagged as MLflow's "Model training" kind (``tags.EXPERIMENT_KIND``;
        an existing one without the tag gets it). Background logs of the store still running are
    waited for first. For a server this is one request, bounded by
        ``tracking.timeout`` and ``tracking.retries``, each time; a local store is opened under
        its store lock the first time in a process, and later calls (the jobs of a sweep in one
        process) reuse what that found. Raises TrackingStoreError naming the URI and what to do."""
    apply_http_settings(cfg)
    uri = tracking_uri(cfg)
    ready = _ready(uri)
    if ready is not None and cfg.experiment in ready.experiment_ids:
        return ready.experiment_ids[cfg.experiment]
    kind = kind_of(uri)
    if ready is None:
        wait_for_pending(uri)  # not under the store lock, as in open_client
    with exclusive_lock(None if ready else lock_file(uri, "store")):
        client = _client(uri, cfg) if ready else _open_locked(uri, kind, cfg)
        try:
            experiment_id = _experiment_id(client, cfg, uri)
        except Exception as exc:
            raise store_error(uri, cfg, "did not answer", exc) from None
    _mark_ready(uri, kind).experiment_ids[cfg.experiment] = experiment_id
    return experiment_id


def _experiment_id(client: Any, cfg: TrackingConfig, uri: str) -> str:
    experiment = client.get_experiment_by_name(cfg.experiment)
    if experiment is not None:
        _set_kind_if_missing(client, experiment)
        return str(experiment.experiment_id)
    try:
        kind = {tag.EXPERIMENT_KIND: tag.RUNS_TABLE_KIND}
        return str(client.create_experiment(cfg.experiment, artifact_location(cfg, uri), tags=kind))
    except Exception:  # a remote store: another process created it between get and create
        experiment = client.get_experiment_by_name(cfg.experiment)
        if experiment is None:
            raise
        _set_kind_if_missing(client, experiment)
        return str(experiment.experiment_id)


def _set_kind_if_missing(client: Any, experiment: Any) -> None:
    """Record the experiment as MLflow's "Model training" kind unless its kind was already
    set (by ragsweep, or by a user in the UI: that choice is kept). MLflow 3.17's UI picks
    the page an experiment opens on by the browser's workflow switch instead; the URL that
    ``ragsweep ui`` prints sets it (:data:`ragsweep.cli.ui.RUNS_VIEW_QUERY`)."""
    if tag.EXPERIMENT_KIND not in experiment.tags:
        client.set_experiment_tag(
            experiment.experiment_id, tag.EXPERIMENT_KIND, tag.RUNS_TABLE_KIND
        )


def store_error(
    uri: str, cfg: TrackingConfig | None, what: str, exc: BaseException
) -> TrackingStoreError:
    """``tracking store URI <what>: <reason>; <what to do>``."""
    advice = kind_of(uri).advice(uri, cfg or TrackingConfig())
    return TrackingStoreError(f"tracking store {uri} {what}: {reason(exc)}; {advice}")


def reason(exc: BaseException) -> str:
    """The first line of ``exc``'s message (at most ``REASON_CHARS`` characters)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"
