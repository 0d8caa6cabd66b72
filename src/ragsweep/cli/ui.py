"""``ragsweep ui [--host HOST] [--port PORT] [--workers N] [OVERRIDES...]``: the MLflow UI
over the project's store, with the address of the experiment printed first (``make ui``).

The store and the experiment are the ones ``ragsweep OVERRIDES...`` logs into
(``tracking.uri``, ``tracking.experiment``; docs/tracking.md). The experiment is looked up
without creating or migrating anything; then this process becomes ``mlflow ui`` on
``HOST:PORT`` over that store (its pid is kept, so stopping it stops the UI).

- A local SQLite store that does not exist yet is an error (exit status 2): ``mlflow ui``
  would create it without ragsweep's store lock (docs/tracking.md, "What happens when").
- A store whose experiment does not exist yet: the UI's home page is printed instead.
- A tracking server (``http://...``) serves its own UI: the experiment's address there is
  printed and nothing is started.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from contextlib import closing
from urllib.parse import urlparse

from ragsweep.cli.errors import reported_errors
from ragsweep.config.app import compose, plain_config
from ragsweep.config.schema import TrackingConfig, from_mapping
from ragsweep.core.errors import RagsweepError
from ragsweep.tracking.store import (
    TrackingStoreError,
    apply_http_settings,
    artifact_location,
    open_client,
    sqlite_path,
    store_error,
    tracking_uri,
    wait_for_pending,
)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 5000
DEFAULT_WORKERS = 1
"""Server processes: one serves a user on this machine and starts in half the time of
MLflow's default of 4 (each imports MLflow)."""


RUNS_VIEW_QUERY = "?workflowType=machine_learning"
"""Opens an experiment on its runs table in any browser. MLflow 3.17's UI opens an
experiment on the page of the browser's workflow switch ("GenAI", the default, or "Model
training", kept in the browser's localStorage), which this URL parameter overrides; the
experiment tag ``mlflow.experimentKind`` (set by ragsweep) is not consulted for that."""


def experiment_url(base_url: str, experiment_id: str | None) -> str:
    """The UI's address of experiment ``experiment_id``'s runs table, or of the UI's home
    page when there is no experiment yet."""
    base = base_url.rstrip("/")
    if experiment_id is None:
        return f"{base}/"
    return f"{base}/#/experiments/{experiment_id}{RUNS_VIEW_QUERY}"


def _sqlite_experiment_id(uri: str, name: str) -> str | None:
    """The active experiment ``name`` in a SQLite store, read-only (no schema migration)."""
    path = sqlite_path(uri)
    if path is None or not path.is_file():
        raise TrackingStoreError(
            f"no MLflow store at {uri} yet: nothing has been logged there (run `make run` or "
            "`make sweep` first, or pass tracking.uri=...)"
        )
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
        row = db.execute(
            "SELECT experiment_id FROM experiments WHERE name = ? AND lifecycle_stage = 'active'",
            (name,),
        ).fetchone()
    return None if row is None else str(row[0])


def _client_experiment_id(uri: str, name: str) -> str | None:
    """The experiment ``name`` as MLflow's client finds it (other kinds of store)."""
    client = open_client(uri)
    try:
        experiment = client.get_experiment_by_name(name)
    except Exception as exc:  # a server that is down, a database that refuses
        raise store_error(uri, None, "did not answer", exc) from None
    return None if experiment is None else str(experiment.experiment_id)


EXPERIMENT_LOOKUPS: dict[str, Callable[[str, str], str | None]] = {
    "sqlite": _sqlite_experiment_id,
}
"""URI scheme → how to find the experiment id without changing the store; other schemes
ask MLflow's client."""
SERVED_SCHEMES = ("http", "https")
"""Stores that are tracking servers: they serve the UI themselves."""


def find_experiment_id(uri: str, name: str) -> str | None:
    """The id of the experiment ``name`` in the store ``uri`` (None: not there yet)."""
    lookup = EXPERIMENT_LOOKUPS.get(urlparse(uri).scheme, _client_experiment_id)
    try:
        return lookup(uri, name)
    except (sqlite3.Error, OSError) as exc:
        raise TrackingStoreError(f"cannot read the MLflow store {uri}: {exc}") from None


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ragsweep ui",
        description="The MLflow UI over the project's store; prints the experiment's URL.",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"default {DEFAULT_HOST}")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    parser.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, help=f"default {DEFAULT_WORKERS}"
    )
    parser.add_argument(
        "overrides", nargs="*", help="config overrides, as for ragsweep (tracking.uri=...)"
    )
    return parser.parse_args(list(argv))


def _tracking_config(overrides: Sequence[str]) -> TrackingConfig:
    with reported_errors():
        config = plain_config(compose(overrides))
    return from_mapping(TrackingConfig, config["tracking"], "tracking")


def mlflow_ui_command(cfg: TrackingConfig, uri: str, args: argparse.Namespace) -> list[str]:
    """``python -m mlflow ui`` over ``uri`` on ``--host``:``--port`` (this interpreter's
    MLflow)."""
    command = [sys.executable, "-m", "mlflow", "ui", "--host", args.host, "--port", str(args.port)]
    command += ["--workers", str(args.workers), "--backend-store-uri", uri]
    artifacts = artifact_location(cfg, uri)
    return command + (["--default-artifact-root", artifacts] if artifacts else [])


def main(argv: Sequence[str]) -> int:
    """Print the experiment's URL, then exec ``mlflow ui`` (see the module docstring)."""
    args = _parse(argv)
    try:
        cfg = _tracking_config(args.overrides)
        apply_http_settings(cfg)
        uri = tracking_uri(cfg)
        wait_for_pending(uri)  # a run logged in the background appears once it landed
        experiment_id = find_experiment_id(uri, cfg.experiment)
    except RagsweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    served = urlparse(uri).scheme in SERVED_SCHEMES
    url = experiment_url(uri if served else f"http://{args.host}:{args.port}", experiment_id)
    if experiment_id is None:
        print(f"no experiment {cfg.experiment!r} in {uri} yet", file=sys.stderr)
    print(f"MLflow UI: {url}", flush=True)
    if served:
        return 0  # the tracking server is the UI
    command = mlflow_ui_command(cfg, uri, args)
    os.execv(command[0], command)
    return 0  # not reached: execv replaces the process
