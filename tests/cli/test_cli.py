"""The ``ragsweep`` console script as a user runs it (subprocesses)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

from tests.run.test_pipeline import project_overrides

RAGSWEEP = Path(sys.executable).parent / "ragsweep"


def ragsweep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": ""}
    return subprocess.run(
        [str(RAGSWEEP), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def test_bad_value_exits_2_with_the_key_and_range(tmp_path: Path) -> None:
    out = ragsweep(
        f"paths.output_dir={tmp_path}", "chunking.size=400", "chunking.overlap=400", cwd=tmp_path
    )
    assert out.returncode == 2
    assert "error: chunking.overlap=400 must satisfy 0 <= overlap < chunking.size (=400)" in (
        out.stderr
    )
    assert "Traceback" not in out.stderr


def test_unknown_mode_suggests_the_near_match(tmp_path: Path) -> None:
    out = ragsweep(f"paths.output_dir={tmp_path}", "chunking.mode=headings", cwd=tmp_path)
    assert out.returncode == 2
    assert (
        "chunking.mode='headings' is not one of: fixed, heading, paragraph, recursive, "
        "semantic, sentence; did you mean "
        "'heading'?" in out.stderr
    )


def test_grid_multirun_logs_one_run_per_job(tmp_path: Path, mini_project: Path) -> None:
    out = ragsweep(
        "-m",
        f"paths.output_dir={tmp_path}",
        *project_overrides(mini_project),
        "chunking.size=100,140",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ragsweep")
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.data.params["chunking.size"] for r in runs) == ["100", "140"]
    assert all(r.info.status == "FINISHED" for r in runs)
    assert experiment.artifact_location.startswith("file://")
    assert str(tmp_path) in experiment.artifact_location
