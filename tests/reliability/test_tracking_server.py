"""A tracking server that is down or hangs (issue 12, item 2): the store is checked before
any work with bounded timeouts, a grid or sweep fails at launch, and a server that fails at
the end of a run leaves a complete run directory that ``ragsweep-log`` logs later.

Every server here is real and on 127.0.0.1: a closed port, a socket server that accepts and
never answers, and MLflow's own tracking server (behind a proxy that hangs on run creation).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.config.schema import TrackingConfig
from ragsweep.core import tags as tag
from ragsweep.eval.case_table import SHOWN_FIELDS
from ragsweep.tracking.store import TrackingStoreError, prepare_store
from tests.reliability.tracking_servers import (
    HoldingProxy,
    MlflowServer,
    SilentServer,
    closed_port,
)
from tests.run.test_pipeline import project_overrides

BIN = Path(sys.executable).parent
FAST = ("tracking.timeout=1", "tracking.retries=0")


def run(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": ""}
    return subprocess.run(
        [str(BIN / tool), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    with SilentServer() as server:
        yield server


@pytest.fixture(scope="module")
def mlflow_server(
    tmp_path_factory: pytest.TempPathFactory, migrated_mlflow_db: Path
) -> Iterator[MlflowServer]:
    with MlflowServer(tmp_path_factory.mktemp("server"), migrated_mlflow_db) as server:
        yield server


def no_work_done(outputs: Path) -> bool:
    return not list(outputs.rglob("cases.jsonl")) and not list(outputs.rglob("chunks.jsonl"))


@pytest.mark.parametrize("retries", [0, 1])
def test_a_hanging_server_fails_the_check_within_the_configured_bound(
    silent: SilentServer, retries: int
) -> None:
    cfg = TrackingConfig(uri=silent.uri, timeout=1, retries=retries)
    started = time.monotonic()
    with pytest.raises(TrackingStoreError) as error:
        prepare_store(cfg)
    elapsed = time.monotonic() - started
    # each attempt waits tracking.timeout; retry n > 1 also backs off 2^(n-1) s (+ jitter)
    assert (retries + 1) * 1.0 <= elapsed < (retries + 1) * 1.0 + 4.0
    message = str(error.value)
    assert f"tracking store {silent.uri} did not answer" in message
    assert "tracking.timeout=1 s" in message and f"tracking.retries={retries}" in message
    assert len(silent.accepted) == retries + 1  # every attempt reached the server


def test_a_closed_port_fails_the_check_at_once() -> None:
    uri = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(TrackingStoreError, match=f"tracking store {uri} did not answer"):
        prepare_store(TrackingConfig(uri=uri, timeout=5, retries=0))
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("server", ["closed", "silent"])
def test_a_run_stops_before_any_work_with_exit_2(
    tmp_path: Path, mini_project: Path, silent: SilentServer, server: str
) -> None:
    uri = silent.uri if server == "silent" else f"http://127.0.0.1:{closed_port()}"
    outputs = tmp_path / "outputs"
    out = run(
        "ragsweep",
        f"paths.output_dir={outputs}",
        f"tracking.uri={uri}",
        *FAST,
        *project_overrides(mini_project),
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"error: tracking store {uri} did not answer" in out.stderr
    assert "Traceback" not in out.stderr
    assert no_work_done(outputs)


@pytest.mark.parametrize(
    ("launch", "connections"),
    [
        # the grid's launch asks /health first (requests, no MLflow), then MLflow's own
        # check (tracking.retries=0): two connections, however many jobs
        ("grid", 2),
        # the sweep engine checks the store once with MLflow, after its inputs
        ("sweep", 1),
    ],
)
def test_a_multirun_fails_at_launch_not_in_every_job(
    tmp_path: Path, mini_project: Path, silent: SilentServer, launch: str, connections: int
) -> None:
    sweep = tmp_path / "mini.yaml"
    sweep.write_text("axes:\n  - chunking.size: [100, 140, 180]\n", encoding="utf-8")
    what = f"sweep={sweep}" if launch == "sweep" else "chunking.size=100,140,180"
    outputs = tmp_path / "outputs"
    out = run(
        "ragsweep",
        "-m",
        what,
        f"paths.output_dir={outputs}",
        f"hydra.sweep.dir={tmp_path / 'multirun'}",
        f"tracking.uri={silent.uri}",
        *FAST,
        *project_overrides(mini_project)[:2],
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"error: tracking store {silent.uri} did not answer" in out.stderr
    assert not (tmp_path / "multirun" / "0").exists()  # no job was launched
    assert len(silent.accepted) == connections  # one check, not one per job (three jobs)
    assert no_work_done(tmp_path)


@pytest.mark.slow  # starts MLflow's server (~15 s) and a full run
def test_a_server_failing_at_the_end_keeps_the_run_for_ragsweep_log(
    tmp_path: Path, mini_project: Path, mlflow_server: MlflowServer
) -> None:
    experiment = "end-failure"
    outputs = tmp_path / "outputs"
    with HoldingProxy(mlflow_server.uri, hold=("/runs/create",)) as proxy:
        out = run(
            "ragsweep",
            f"paths.output_dir={outputs}",
            f"tracking.uri={proxy.uri}",
            f"tracking.experiment={experiment}",
            *FAST,
            *project_overrides(mini_project),
            cwd=tmp_path,
        )
        assert proxy.held, "the run never tried to create its MLflow run"
    assert out.returncode == 2, out.stderr[-2000:]
    (record_file,) = outputs.rglob("record.json")
    run_dir = record_file.parent
    assert f"error: run directory {run_dir} holds the whole run" in out.stderr
    assert f"ragsweep-log {run_dir}" in out.stderr
    for name in ("config.yaml", "cases.jsonl", "chunks.jsonl", "report.md"):
        assert (run_dir / name).stat().st_size > 0

    client = MlflowClient(mlflow_server.uri)
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    assert client.search_runs([experiment_id]) == []  # nothing reached the store

    logged = run("ragsweep-log", str(run_dir), "--tracking-uri", mlflow_server.uri, cwd=tmp_path)
    assert logged.returncode == 0, logged.stderr[-2000:]
    (mlflow_run,) = client.search_runs([experiment_id])
    assert f"{run_dir}: logged as run {mlflow_run.info.run_id}" in logged.stdout
    record = json.loads(record_file.read_text(encoding="utf-8"))
    assert mlflow_run.info.status == "FINISHED"
    assert mlflow_run.data.tags[tag.LOGGED] == "complete"
    assert mlflow_run.data.tags[tag.RECORD_ID] == record["record_id"]
    assert mlflow_run.data.metrics == pytest.approx(record["metrics"])
    assert mlflow_run.data.params == record["params"]
    artifacts = {a.path for a in client.list_artifacts(mlflow_run.info.run_id)}
    assert {"cases.jsonl.gz", "cases_table.json", "config.yaml", "report.md"} <= artifacts
    assert "record.json" not in artifacts  # its content is the run's params, metrics, tags
    stored = Path(client.download_artifacts(mlflow_run.info.run_id, "", str(tmp_path / "dl")))
    assert not {"cases.jsonl", "chunks.jsonl", "chunks.jsonl.gz"} & artifacts  # as a run does
    kept = [
        json.loads(line)
        for line in gzip.decompress((stored / "cases.jsonl.gz").read_bytes()).splitlines()
    ]
    whole = [json.loads(line) for line in (run_dir / "cases.jsonl").read_text().splitlines()]
    assert kept == [{k: v for k, v in r.items() if k not in SHOWN_FIELDS} for r in whole]

    again = run("ragsweep-log", str(run_dir), "--tracking-uri", mlflow_server.uri, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"already logged as run {mlflow_run.info.run_id}" in again.stdout
    assert len(client.search_runs([experiment_id])) == 1


def test_ragsweep_log_names_a_directory_without_a_record(tmp_path: Path) -> None:
    out = run("ragsweep-log", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2
    assert f"error: {tmp_path}: {tmp_path / 'record.json'}: not a run record" in out.stderr
