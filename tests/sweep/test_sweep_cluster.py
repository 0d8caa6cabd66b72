"""Sweeps on a cluster, run as a user runs them (the ``ragsweep`` console script): through
Hydra's Ray launcher on a local Ray head node, and through the submitit launcher's local
executor (what runs SLURM jobs, minus SLURM). Each runs the 4-job one-axis sweep of
:mod:`tests.cluster_support`, one of whose jobs fails on its worker, and checks the store
and the sweep result as the joblib test does (docs/deploy.md, "Sweeps on Ray")."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.cli.test_cli import RAGSWEEP
from tests.cluster_support import RETRIEVER, SWEEP, RayHead, check_sweep, ray_head, worker_env
from tests.run.test_pipeline import project_overrides

BIN = Path(sys.executable).parent
SWEEP_SECONDS = 600


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


needs_ray = pytest.mark.skipif(
    not _has("hydra_plugins.hydra_ray_launcher"), reason="needs the extra ragsweep[cluster]"
)
needs_submitit = pytest.mark.skipif(
    not _has("hydra_plugins.hydra_submitit_launcher"), reason="needs the extra ragsweep[cluster]"
)


def run_sweep(tmp_path: Path, project: Path, *launcher: str) -> subprocess.CompletedProcess[str]:
    sweep = tmp_path / "cluster.yaml"
    sweep.write_text(SWEEP, encoding="utf-8")
    return ragsweep_cli(
        tmp_path,
        "-m",
        f"sweep={sweep}",
        *launcher,
        f"paths.output_dir={tmp_path / 'outputs'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *project_overrides(project, *RETRIEVER),
    )


def ragsweep_cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RAGSWEEP), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=worker_env(),
        timeout=SWEEP_SECONDS,
    )


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayHead]:
    """A Ray head node on 127.0.0.1 with 2 CPUs, stopped (its process group) at the end.
    Its folder is a short one directly under the temp dir: Ray's socket paths inside it
    must stay within the 107 characters of a Unix socket address."""
    folder = Path(tempfile.mkdtemp(prefix="ray-"))
    try:
        with ray_head(BIN / "ray", folder) as head:
            yield head
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.cluster
@needs_ray
def test_one_axis_sweep_on_a_ray_cluster(
    tmp_path: Path, mini_project: Path, ray_cluster: RayHead
) -> None:
    out = run_sweep(
        tmp_path,
        mini_project,
        "hydra/launcher=ray_cluster",
        f"hydra.launcher.ray.init.address={ray_cluster.address}",
    )
    check_sweep(out, tmp_path)
    assert "Connected to Ray cluster" in out.stderr  # joined the head, did not start a Ray


@pytest.mark.slow
@pytest.mark.cluster
@needs_ray
def test_grid_on_a_ray_cluster(tmp_path: Path, mini_project: Path, ray_cluster: RayHead) -> None:
    out = ragsweep_cli(
        tmp_path,
        "-m",
        "hydra/launcher=ray_cluster",
        f"hydra.launcher.ray.init.address={ray_cluster.address}",
        f"paths.output_dir={tmp_path / 'outputs'}",
        f"hydra.sweep.dir={tmp_path / 'grid'}",
        *project_overrides(mini_project),
        "chunking.size=100,140",
        "preprocess=none,nfkc",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    runs = client.search_runs(client.get_experiment_by_name("ragsweep").experiment_id)
    jobs = sorted((r.data.params["chunking.size"], r.data.params["preprocess.name"]) for r in runs)
    assert jobs == [("100", "nfkc"), ("100", "none"), ("140", "nfkc"), ("140", "none")]
    assert all(r.info.status == "FINISHED" for r in runs)


@pytest.mark.slow
@pytest.mark.cluster
@needs_submitit
def test_one_axis_sweep_through_submitit(tmp_path: Path, mini_project: Path) -> None:
    out = run_sweep(tmp_path, mini_project, "hydra/launcher=submitit_local")
    check_sweep(out, tmp_path)
    # each job ran as a submitit job of its own: its folder holds the job's log and result
    assert len(list((tmp_path / "sweep" / ".submitit").glob("*/*_result.pkl"))) == 4
