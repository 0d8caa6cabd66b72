"""The sweep's logger (:mod:`ragsweep.sweep.logger`, issue 13): the jobs of ``ragsweep -m``
on the basic launcher hand their runs to one ``ragsweep-log --serve`` process; every run is
in the store, logged once and completely, before the sweep reads it or exits; a logger that
dies is replaced by logging in the sweep's process without a second run; a run that cannot
be logged is reported with the command that logs it.

Every sweep and run is a real ``ragsweep`` process on the mini project, every store a real
SQLite file, the logger the real process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from mlflow.tracking import MlflowClient

from ragsweep import tags as tag
from ragsweep.artifact_store import RECORD_FILE
from ragsweep.config import TrackingConfig
from ragsweep.sweep.logger import LOGGER_OUTPUT, SweepLogger
from tests.test_case_table import project

BIN = Path(sys.executable).parent
ENV = {**os.environ, "MLFLOW_TRACKING_URI": ""}


def ragsweep(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(BIN / "ragsweep"), *args], cwd=cwd, capture_output=True, text=True, env=ENV
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def sweep(tmp_path: Path, mini_project: Path, *extra: str) -> tuple[Path, Path]:
    """A two-value one-axis sweep of the mini project; its output and sweep folders."""
    out = tmp_path / "out"
    spec = tmp_path / "overlap.yaml"
    spec.write_text("axes:\n  - chunking.overlap: [0, 10]\n", encoding="utf-8")
    sweep_dir = tmp_path / "sweep"
    ragsweep(
        tmp_path,
        "-m",
        f"sweep={spec}",
        f"paths.output_dir={out}",
        f"hydra.sweep.dir={sweep_dir}",
        *project(mini_project),
        *extra,
    )
    return out, sweep_dir


def runs(out: Path) -> list:
    client = MlflowClient(f"sqlite:///{out / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ragsweep")
    return client.search_runs([experiment.experiment_id])


def test_a_sweep_s_jobs_are_logged_once_by_its_logger(tmp_path: Path, mini_project: Path):
    out, sweep_dir = sweep(tmp_path, mini_project)
    logged = runs(out)
    children = [r for r in logged if tag.PARENT_RUN_ID in r.data.tags]
    assert len(children) == 2
    assert {r.data.params["chunking.overlap"] for r in children} == {"0", "10"}
    assert all(r.data.tags[tag.LOGGED] == "complete" for r in children)
    assert all(r.info.status == "FINISHED" for r in children)
    assert len({r.data.tags[tag.RECORD_ID] for r in children}) == 2
    # the logger logged them, one line each, and the parent links the children it read
    lines = (sweep_dir / LOGGER_OUTPUT).read_text(encoding="utf-8").splitlines()
    assert sorted(line.rsplit(" ", 1)[1] for line in lines) == sorted(
        r.info.run_id for r in children
    )
    (parent,) = [r for r in logged if tag.PARENT_RUN_ID not in r.data.tags]
    assert any(r.info.run_id in parent.data.tags[tag.NOTE] for r in children)


def test_with_background_never_a_sweep_logs_in_its_own_process(tmp_path: Path, mini_project: Path):
    out, sweep_dir = sweep(tmp_path, mini_project, "tracking.background=never")
    children = [r for r in runs(out) if tag.PARENT_RUN_ID in r.data.tags]
    assert len(children) == 2
    assert all(r.data.tags[tag.LOGGED] == "complete" for r in children)
    assert not (sweep_dir / LOGGER_OUTPUT).exists()


def logged_run_dir(tmp_path: Path, mini_project: Path) -> tuple[Path, TrackingConfig]:
    """The run directory of a single run logged in its process to a fresh store, and that
    store's settings."""
    out = tmp_path / "out"
    ragsweep(
        tmp_path, f"paths.output_dir={out}", "tracking.background=never", *project(mini_project)
    )
    (run_dir,) = (out / "runs").glob("*/*")
    record = json.loads((run_dir / RECORD_FILE).read_text(encoding="utf-8"))
    return run_dir, TrackingConfig(**{**record["tracking"], "tags": {}})


def copied_with_new_record(run_dir: Path, to: Path) -> Path:
    """A copy of ``run_dir`` whose record was never logged (a new record id)."""
    shutil.copytree(run_dir, to)
    record = json.loads((to / RECORD_FILE).read_text(encoding="utf-8"))
    record["record_id"] = uuid.uuid4().hex
    (to / RECORD_FILE).write_text(json.dumps(record), encoding="utf-8")
    return to


def test_a_dead_logger_s_runs_are_logged_in_the_sweep_s_process_once(
    tmp_path: Path, mini_project: Path
):
    run_dir, tracking = logged_run_dir(tmp_path, mini_project)
    fresh = copied_with_new_record(run_dir, tmp_path / "fresh")
    logger = SweepLogger.start(tmp_path / "logger.txt", tracking)
    logger.process.kill()
    logger.process.wait()
    logger.submit(run_dir)  # already in the store: found there, not logged again
    logger.submit(fresh)
    outcome = logger.close()
    assert [o.error for o in outcome] == [None, None]
    assert all(o.run_id for o in outcome)
    logged = runs(tmp_path / "out")
    assert len(logged) == 2
    assert {r.info.run_id for r in logged} == {o.run_id for o in outcome}
    assert all(r.data.tags[tag.LOGGED] == "complete" for r in logged)


def test_a_run_the_logger_cannot_log_is_reported_with_the_command_that_logs_it(
    tmp_path: Path, mini_project: Path
):
    run_dir, tracking = logged_run_dir(tmp_path, mini_project)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / RECORD_FILE).write_text("{not json", encoding="utf-8")
    fresh = copied_with_new_record(run_dir, tmp_path / "fresh")
    logger = SweepLogger.start(tmp_path / "logger.txt", tracking)
    logger.submit(broken)
    logger.submit(fresh)  # the logger goes on after a failure
    outcome = logger.close()
    assert outcome[0].run_id is None
    assert "not a run record" in (outcome[0].error or "")
    message = outcome[0].describe()
    assert message.startswith(f"error: run directory {broken.resolve()} was not logged")
    assert message.endswith(f"log it with: ragsweep-log {broken.resolve()}")
    assert outcome[1].error is None and outcome[1].run_id
    assert logger.process.returncode == 0
    assert len(runs(tmp_path / "out")) == 2
