"""Cheap checks first (issue 32, item 5): a broken sweep file is refused before any MLflow
store is created, a store file that cannot be written is refused before any work, and
refused input leaves no run directory."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.reliability.conftest import run_command
from tests.run.test_pipeline import project_overrides


@pytest.mark.parametrize("text", ["- a\n- b\n", "", "description: no axes\n"])
def test_a_broken_sweep_file_is_refused_before_the_store_exists(
    tmp_path: Path, mini_project: Path, text: str
) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "broken.yaml").write_text(text, encoding="utf-8")
    out_dir = tmp_path / "out"
    args = [f"paths.output_dir={out_dir}", *project_overrides(mini_project)]
    out = run_command(
        "ragsweep",
        "-m",
        *args,
        f"hydra.sweeper.sweeps_dir={sweeps}",
        "sweep=broken",
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.startswith(f"error: {sweeps / 'broken.yaml'}")
    assert not out_dir.exists()  # no MLflow store created, no sweep folder


def test_an_immutable_store_is_refused_before_any_work(tmp_path: Path, mini_project: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    store = out_dir / "mlflow.db"
    store.write_bytes(b"")
    if subprocess.run(["chattr", "+i", str(store)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported here")
    try:
        args = [f"paths.output_dir={out_dir}", *project_overrides(mini_project)]
        out = run_command("ragsweep", *args, cwd=tmp_path)
    finally:
        subprocess.run(["chattr", "-i", str(store)], check=True)
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"the file {store} cannot be written (Operation not permitted)" in out.stderr
    assert f"chattr -i {store}" in out.stderr and "Traceback" not in out.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["mlflow.db"]  # no run directory


def test_a_refused_golden_set_leaves_no_run_directory(tmp_path: Path, mini_project: Path) -> None:
    (mini_project / "golden.jsonl").write_text('{"id": "x"}\nnot json\n', encoding="utf-8")
    out_dir = tmp_path / "out"
    out = run_command(
        "ragsweep", f"paths.output_dir={out_dir}", *project_overrides(mini_project), cwd=tmp_path
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert "golden.jsonl:2: invalid JSON" in out.stderr
    assert not (out_dir / "runs").exists()


@pytest.mark.parametrize("tracking", ["true", "false"])
def test_a_sweeps_broken_golden_set_is_refused_before_the_store_exists(
    tmp_path: Path, mini_project: Path, tracking: str
) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "one.yaml").write_text("axes:\n  - chunking.size: [120, 200]\n", encoding="utf-8")
    (mini_project / "golden.jsonl").write_text('{"id": "x"}\nnot json\n', encoding="utf-8")
    out_dir = tmp_path / "out"
    args = [f"paths.output_dir={out_dir}", f"tracking.enabled={tracking}"]
    args += project_overrides(mini_project)
    out = run_command(
        "ragsweep", "-m", *args, f"hydra.sweeper.sweeps_dir={sweeps}", "sweep=one", cwd=tmp_path
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert "golden.jsonl:2: invalid JSON" in out.stderr and "Traceback" not in out.stderr
    assert not out_dir.exists()  # no store created or migrated for it, no job, no folder


def test_a_sweep_folder_that_cannot_be_written_leaves_no_parent_run(
    tmp_path: Path, mini_project: Path
) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "one.yaml").write_text("axes:\n  - chunking.size: [120, 200]\n", encoding="utf-8")
    sweep_dir = tmp_path / "s"
    (sweep_dir / "multirun.yaml").mkdir(parents=True)  # root writes anywhere: a folder blocks it
    out_dir = tmp_path / "out"
    args = [f"paths.output_dir={out_dir}", *project_overrides(mini_project)]
    args += [f"hydra.sweeper.sweeps_dir={sweeps}", f"hydra.sweep.dir={sweep_dir}", "sweep=one"]
    out = run_command("ragsweep", "-m", *args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"sweep folder {sweep_dir}: cannot write multirun.yaml" in " ".join(out.stderr.split())
    assert "Traceback" not in out.stderr
    assert not out_dir.exists()  # the parent run was never opened, so none is left RUNNING
