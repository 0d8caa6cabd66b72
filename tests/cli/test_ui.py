"""``ragsweep ui`` (``make ui``) and the experiment kind ragsweep gives its experiments; the
browser's view of the UI is in tests/browser/test_mlflow_ui.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

from ragsweep.cli.ui import experiment_url, find_experiment_id
from ragsweep.config.schema import TrackingConfig
from ragsweep.core import tags as tag
from ragsweep.tracking.store import prepare_store

RAGSWEEP = Path(sys.executable).parent / "ragsweep"


def ragsweep_ui(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": ""}
    return subprocess.run(
        [str(RAGSWEEP), "ui", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120
    )


def test_a_new_experiment_is_tagged_as_model_training(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    experiment_id = prepare_store(TrackingConfig(uri=uri, experiment="fresh"))
    tags = MlflowClient(uri).get_experiment(experiment_id).tags
    assert tags[tag.EXPERIMENT_KIND] == tag.RUNS_TABLE_KIND == "custom_model_development"


def test_an_existing_experiment_gets_the_kind_once_and_a_users_choice_is_kept(
    tmp_path: Path,
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    untagged = client.create_experiment("old", (tmp_path / "a").as_uri())
    chosen = client.create_experiment(
        "chosen", (tmp_path / "b").as_uri(), tags={tag.EXPERIMENT_KIND: "genai_development"}
    )
    assert prepare_store(TrackingConfig(uri=uri, experiment="old")) == untagged
    assert prepare_store(TrackingConfig(uri=uri, experiment="chosen")) == chosen
    assert client.get_experiment(untagged).tags[tag.EXPERIMENT_KIND] == tag.RUNS_TABLE_KIND
    assert client.get_experiment(chosen).tags[tag.EXPERIMENT_KIND] == "genai_development"


def test_the_url_opens_the_runs_table_of_the_experiment() -> None:
    assert (
        experiment_url("http://127.0.0.1:5000", "7")
        == "http://127.0.0.1:5000/#/experiments/7?workflowType=machine_learning"
    )
    assert experiment_url("http://127.0.0.1:5000/", None) == "http://127.0.0.1:5000/"


def test_the_experiment_is_found_without_changing_the_store(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    experiment_id = prepare_store(TrackingConfig(uri=uri, experiment="ragsweep"))
    before = db.read_bytes()
    assert find_experiment_id(uri, "ragsweep") == experiment_id
    assert find_experiment_id(uri, "other") is None
    assert db.read_bytes() == before


def test_no_store_yet_is_an_error_and_nothing_is_created(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    out = ragsweep_ui(f"tracking.uri=sqlite:///{db}", cwd=tmp_path)
    assert out.returncode == 2
    assert f"error: no MLflow store at sqlite:///{db} yet" in out.stderr
    assert not db.exists()


def test_a_tracking_server_serves_its_own_ui(tmp_path: Path) -> None:
    """Nothing is started: the URL on the server is printed (the lookup goes to the server,
    so a closed port is reported like any unreachable store)."""
    out = ragsweep_ui(
        "tracking.uri=http://127.0.0.1:9", "tracking.timeout=1", "tracking.retries=0", cwd=tmp_path
    )
    assert out.returncode == 2
    assert "error: " in out.stderr and "127.0.0.1:9" in out.stderr
    assert "Traceback" not in out.stderr
