"""No empty or unknown id means something else (issue 32, item 2): an empty run id is
refused by every tool that takes one, and ``tracking.parent_run_id`` must name a running
or resumable sweep parent of the same experiment, refused before any work."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.config.schema import TrackingConfig
from ragsweep.core import tags as tag
from ragsweep.tracking.parent import ParentRunError, check_parent_run
from tests.reliability.conftest import run_command
from tests.run.test_pipeline import project_overrides

EMPTY = "an empty run id names no run"


@pytest.mark.parametrize(
    "args",
    [
        ("ragsweep-promote", ""),
        ("ragsweep-promote", " "),
        ("ragsweep-compare", "", "0123456789abcdef0123456789abcdef"),
        ("ragsweep-compare", "0123456789abcdef0123456789abcdef", ""),
        ("ragsweep-gate", "ratchet", ""),
        ("ragsweep-gate", "check", "--run", ""),
    ],
)
def test_an_empty_run_id_is_an_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    out = run_command(*args, cwd=tmp_path, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path}/m.db")
    assert out.returncode == 2, out.stderr
    assert EMPTY in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "m.db").exists()  # refused before the store was opened


def test_an_empty_run_directory_or_store_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "record.json").write_text("{}", encoding="utf-8")  # "" would be this folder
    out = run_command("ragsweep-log", "", cwd=tmp_path)
    assert out.returncode == 2 and "an empty RUN_DIR names no run directory" in out.stderr
    out = run_command("ragsweep", "best", "--tracking-uri", "", cwd=tmp_path)
    assert out.returncode == 2 and "argument --tracking-uri: an empty value" in out.stderr


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, MlflowClient, str]:
    """A real MLflow store (created once: that takes seconds) with experiment ``ragsweep``."""
    out = tmp_path_factory.mktemp("store")
    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    return out, client, client.create_experiment("ragsweep")


def _parent(client: MlflowClient, experiment: str, status: str, role: bool = True) -> str:
    run = client.create_run(experiment, tags={tag.SWEEP_ROLE: tag.PARENT_ROLE} if role else {})
    if status != "RUNNING":
        client.set_terminated(run.info.run_id, status=status)
    return str(run.info.run_id)


def _tracking(out: Path, parent: str) -> TrackingConfig:
    uri = f"sqlite:///{out / 'mlflow.db'}"
    return TrackingConfig(uri=uri, experiment="ragsweep", parent_run_id=parent)


def test_parent_run_id_must_name_a_joinable_sweep_parent(
    store: tuple[Path, MlflowClient, str],
) -> None:
    out, client, experiment = store
    other = client.create_experiment("other")
    refused = {
        "0123456789abcdef0123456789abcdef": "no such run in sqlite:///",
        _parent(client, experiment, "FINISHED"): "that sweep is FINISHED",
        _parent(client, experiment, "FINISHED", role=False): "is not a sweep's parent run",
        _parent(client, other, "RUNNING"): "is not in experiment 'ragsweep'",
        " ": "tracking.parent_run_id is empty",
    }
    for parent, message in refused.items():
        with pytest.raises(ParentRunError, match=message):
            check_parent_run(_tracking(out, parent))
    for status in ("RUNNING", "KILLED", "FAILED"):  # running, or an interrupted sweep
        check_parent_run(_tracking(out, _parent(client, experiment, status)))


def test_a_finished_parent_is_refused_before_any_work(
    tmp_path: Path, mini_project: Path, store: tuple[Path, MlflowClient, str]
) -> None:
    out_dir, client, experiment = store
    finished = _parent(client, experiment, "FINISHED")
    before = len(client.search_runs([experiment]))
    args = [
        f"paths.output_dir={out_dir}",
        f"tracking.uri=sqlite:///{out_dir / 'mlflow.db'}",
        *project_overrides(mini_project),
    ]
    out = run_command("ragsweep", *args, f"tracking.parent_run_id={finished}", cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "that sweep is FINISHED; a finished sweep takes no more runs" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (out_dir / "runs").exists()  # no run directory
    assert len(client.search_runs([experiment])) == before  # no child attached
