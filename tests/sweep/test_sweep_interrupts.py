"""Ctrl-C during a real sweep (issue 32, item 4): once or twice (the second while the sweep
records its end), the process prints one line, exits 130 without a traceback, and leaves
the parent run KILLED, so the same command resumes it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from tests.reliability.conftest import BIN

INTERRUPTED = "interrupted; the sweep resumes with the same command"


def _wait_for(pattern: str, folder: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 240
    while not any(folder.glob(pattern)):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the sweep's first job never finished"
        time.sleep(0.01)


def test_two_ctrl_c_during_a_sweep_leave_it_killed_without_a_traceback(
    tmp_path: Path, mini_project: Path
) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "sizes.yaml").write_text("axes:\n  - chunking.size: [100, 140, 180]\n", "utf-8")
    out_dir, sweep_dir = tmp_path / "out", tmp_path / "s1"
    args = [
        "-m",
        f"paths.output_dir={out_dir}",
        f"corpus.path={mini_project / 'corpus'}",
        f"golden.path={mini_project / 'golden.jsonl'}",
        "chunking.overlap=20",
        f"hydra.sweeper.sweeps_dir={sweeps}",
        f"hydra.sweep.dir={sweep_dir}",
        "sweep=sizes",
    ]
    env = {**os.environ, "MLFLOW_TRACKING_URI": ""}
    env.pop("HYDRA_FULL_ERROR", None)
    process = subprocess.Popen(
        [str(BIN / "ragsweep"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,  # its own process group: Ctrl-C reaches the group
    )
    _wait_for("*/report.md", sweep_dir, process)
    os.killpg(process.pid, signal.SIGINT)  # as the terminal does on Ctrl-C
    time.sleep(0.3)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)  # again, while the sweep records its end
    _, err = process.communicate(timeout=240)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert [line for line in err.splitlines() if line.strip()][-1] == INTERRUPTED
    client = MlflowClient(f"sqlite:///{out_dir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ragsweep").experiment_id
    (parent,) = client.search_runs([experiment], "tags.`ragsweep.sweep_role` = 'parent'")
    assert parent.info.status == "KILLED"
