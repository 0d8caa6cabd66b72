"""A tracking server asked before any work without MLflow (issue 31): ``/health`` and the
experiment with ``requests``; a server that holds the experiment is left to the run's
logger process, so the run's own process never imports MLflow, as on a ready SQLite store;
one that does not answer stops the run before any work, naming the URI.

The servers are real, on 127.0.0.1: MLflow's own tracking server (the app ``mlflow server``
runs) and a port nothing listens on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.tracking.ready import experiment_is_ready
from ragsweep.tracking.store import TrackingStoreError
from tests.reliability.tracking_servers import MlflowServer, closed_port
from tests.run.test_pipeline import project_overrides
from tests.tracking.test_early_logger import imports_mlflow

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def mlflow_server(
    tmp_path_factory: pytest.TempPathFactory, migrated_mlflow_db: Path
) -> Iterator[MlflowServer]:
    with MlflowServer(tmp_path_factory.mktemp("server"), migrated_mlflow_db) as server:
        yield server


def ragsweep(
    tmp_path: Path, project: Path, uri: str, *extra: str, multirun: bool = False
) -> subprocess.CompletedProcess[str]:
    """``ragsweep`` on the mini project logging to ``uri``, its output to a pipe; stderr also
    lists the modules the run's own process imported (``-X importtime``)."""
    args = [
        *(["-m"] if multirun else []),
        f"paths.output_dir={tmp_path / 'out'}",
        f"hydra.sweep.dir={tmp_path / 'multirun'}",
        f"tracking.uri={uri}",
        *project_overrides(project),
        *extra,
    ]
    return subprocess.run(
        [sys.executable, "-X", "importtime", str(BIN / "ragsweep"), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": ""},
        timeout=300,
    )


def test_a_server_is_ready_only_with_its_experiment_active(mlflow_server: MlflowServer) -> None:
    client = MlflowClient(mlflow_server.uri)
    assert not experiment_is_ready(mlflow_server.uri, "probed")  # answers, no experiment
    experiment_id = client.create_experiment("probed")
    assert experiment_is_ready(mlflow_server.uri, "probed")
    assert experiment_is_ready(mlflow_server.uri + "/", "probed")
    client.delete_experiment(experiment_id)
    assert not experiment_is_ready(mlflow_server.uri, "probed")  # MLflow would refuse it


def test_a_server_that_does_not_answer_is_refused_at_once() -> None:
    uri = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(TrackingStoreError) as error:
        experiment_is_ready(uri, "ragsweep")
    assert time.monotonic() - started < 3.0
    message = str(error.value)
    assert message.startswith(f"tracking store {uri} did not answer: GET {uri}/health")
    assert "mlflow server" in message and "tracking.enabled=false" in message


def test_a_run_on_a_server_that_does_not_answer_stops_before_any_work(
    tmp_path: Path, mini_project: Path
) -> None:
    uri = f"http://127.0.0.1:{closed_port()}"
    refused = ragsweep(tmp_path, mini_project, uri)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert f"error: tracking store {uri} did not answer: GET {uri}/health" in refused.stderr
    assert "Traceback" not in refused.stderr and not imports_mlflow(refused.stderr)
    assert not list((tmp_path / "out").rglob("cases.jsonl")), "work was done before refusing"


@pytest.mark.slow  # a run and a two-job grid, each logged through a server
def test_runs_on_a_ready_server_are_logged_without_mlflow_in_the_run_s_process(
    tmp_path: Path, mini_project: Path, mlflow_server: MlflowServer
) -> None:
    experiment = "ready-server"
    client = MlflowClient(mlflow_server.uri)
    experiment_id = client.create_experiment(experiment)
    named = f"tracking.experiment={experiment}"

    single = ragsweep(tmp_path, mini_project, mlflow_server.uri, named)
    assert single.returncode == 0, single.stderr[-3000:]
    assert not imports_mlflow(single.stderr)
    (logged,) = client.search_runs([experiment_id])
    assert logged.info.run_id in single.stdout + single.stderr  # the summary names it
    assert logged.info.status == "FINISHED" and "recall_at_5" in logged.data.metrics

    grid = ragsweep(
        tmp_path, mini_project, mlflow_server.uri, named, "chunking.size=100,140", multirun=True
    )
    assert grid.returncode == 0, grid.stderr[-3000:]
    assert not imports_mlflow(grid.stderr)  # the sweep's logger opened the store, and logged
    assert len(client.search_runs([experiment_id])) == 3
