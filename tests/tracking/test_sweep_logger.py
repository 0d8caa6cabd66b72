"""The sweep's logger (:mod:`ragsweep.tracking.background`, issue 13): the jobs of ``ragsweep -m``
on the basic launcher hand their runs to one ``ragsweep-log --serve`` process; every run is
in the store, logged once and completely, before the sweep reads it or exits; a logger that
dies is replaced by logging in the sweep's process without a second run; a run that cannot
be logged is reported with the command that logs it.

Every sweep and run is a real ``ragsweep`` process on the mini project, every store a real
SQLite file, the logger the real process.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from ragsweep.config.schema import TrackingConfig
from ragsweep.core import tags as tag
from ragsweep.core.names import RECORD_FILE
from ragsweep.tracking.background import (
    IN_PROCESS_LAUNCHERS,
    LOGGER_OUTPUT,
    Pipes,
    SweepLogger,
    logging_jobs,
)
from ragsweep.tracking.log import load_record, log_run_once
from tests.eval.test_case_table import project

BIN = Path(sys.executable).parent
ENV = {**os.environ, "MLFLOW_TRACKING_URI": ""}


def ragsweep(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(BIN / "ragsweep"), *args], cwd=cwd, capture_output=True, text=True, env=ENV
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def sweep(tmp_path: Path, mini_project: Path, *extra: str, baseline: str = "") -> tuple[Path, Path]:
    """A two-value one-axis sweep of the mini project (``baseline``: the sweep file's
    baseline lines); its output and sweep folders."""
    out = tmp_path / "out"
    spec = tmp_path / "overlap.yaml"
    head = f"baseline:\n{baseline}" if baseline else ""
    spec.write_text(f"{head}axes:\n  - chunking.overlap: [0, 10]\n", encoding="utf-8")
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
    best = parent.data.tags[tag.BEST_RUN_ID]
    assert best in {r.info.run_id for r in children}
    assert best in parent.data.tags[tag.NOTE]
    # the descriptions the sweeper rewrote once the axis was decided went through the logger
    chosen = {r.info.run_id: r.data.tags[tag.CHOSEN] for r in children}
    assert sorted(chosen.values()) == ["false", "true"] and chosen[best] == "true"
    assert all(parent.info.run_id in r.data.tags[tag.NOTE] for r in children)


def test_a_grid_s_jobs_are_logged_by_its_logger(tmp_path: Path, mini_project: Path):
    out, sweep_dir = tmp_path / "out", tmp_path / "grid"
    args = [f"paths.output_dir={out}", f"hydra.sweep.dir={sweep_dir}", *project(mini_project)]
    ragsweep(tmp_path, "-m", *args, "preprocess=none,nfkc")
    logged = runs(out)
    assert sorted(r.data.params["preprocess.name"] for r in logged) == ["nfkc", "none"]
    assert all(r.data.tags[tag.LOGGED] == "complete" for r in logged)
    lines = (sweep_dir / LOGGER_OUTPUT).read_text(encoding="utf-8").splitlines()
    assert sorted(line.rsplit(" ", 1)[1] for line in lines) == sorted(r.info.run_id for r in logged)


def test_with_background_never_a_sweep_logs_in_its_own_process(tmp_path: Path, mini_project: Path):
    out, sweep_dir = sweep(tmp_path, mini_project, "tracking.background=never")
    children = [r for r in runs(out) if tag.PARENT_RUN_ID in r.data.tags]
    assert len(children) == 2
    assert all(r.data.tags[tag.LOGGED] == "complete" for r in children)
    assert not (sweep_dir / LOGGER_OUTPUT).exists()


def test_the_sweep_file_s_baseline_decides_the_logger_and_its_store(
    tmp_path: Path, mini_project: Path
):
    # the baseline's tracking settings are the sweep's: its store gets every run and
    # every description, and its background setting is obeyed
    other = tmp_path / "other.db"
    _, sweep_dir = sweep(tmp_path, mini_project, baseline=f"  tracking.default_db: {other}\n")
    client = MlflowClient(f"sqlite:///{other}")
    experiment = client.get_experiment_by_name("ragsweep")
    children = [
        r
        for r in client.search_runs([experiment.experiment_id])
        if tag.PARENT_RUN_ID in r.data.tags
    ]
    assert len(children) == 2
    assert sorted(r.data.tags[tag.CHOSEN] for r in children) == ["false", "true"]
    assert (sweep_dir / LOGGER_OUTPUT).is_file()

    never_dir = tmp_path / "never"
    never_dir.mkdir()
    _, sweep_dir = sweep(never_dir, mini_project, baseline="  tracking.background: never\n")
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
    assert isinstance(logger.transport, Pipes)
    logger.transport.process.kill()
    logger.transport.process.wait()
    logger.submit(run_dir)  # already in the store: found there, not logged again
    logger.submit(fresh)
    outcome = logger.close()
    assert [o.error for o in outcome] == [None, None]
    assert all(o.run_id for o in outcome)
    logged = runs(tmp_path / "out")
    assert len(logged) == 2
    assert {r.info.run_id for r in logged} == {o.run_id for o in outcome}
    assert all(r.data.tags[tag.LOGGED] == "complete" for r in logged)


def test_an_interrupted_log_is_mended_not_repeated(tmp_path: Path, mini_project: Path):
    run_dir, _ = logged_run_dir(tmp_path, mini_project)
    client = MlflowClient(f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ragsweep").experiment_id
    # a logger killed after the complete tag, before set_terminated: closed and kept
    cfg, record = load_record(run_dir)
    (done,) = client.search_runs([experiment])
    client.update_run(done.info.run_id, status="RUNNING")
    assert log_run_once(cfg, record, saved=True) == done.info.run_id
    assert client.get_run(done.info.run_id).info.status == "FINISHED"
    # killed before the complete tag: that run is closed FAILED, the record logged anew
    fresh = copied_with_new_record(run_dir, tmp_path / "fresh")
    cfg, record = load_record(fresh)
    half = client.create_run(experiment, tags={tag.RECORD_ID: record.record_id})
    run_id = log_run_once(cfg, record, saved=True)
    assert run_id != half.info.run_id
    assert client.get_run(half.info.run_id).info.status == "FAILED"
    assert client.get_run(run_id).data.tags[tag.LOGGED] == "complete"


def test_ragsweep_log_mends_what_a_killed_logger_left(tmp_path: Path, mini_project: Path):
    """``ragsweep-log RUN_DIR`` after a logger was killed: a complete run still RUNNING is
    closed and reported as already logged; a half-logged one is closed FAILED and the
    record logged again, once."""
    run_dir, _ = logged_run_dir(tmp_path, mini_project)
    client = MlflowClient(f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ragsweep").experiment_id
    (done,) = client.search_runs([experiment])
    client.update_run(done.info.run_id, status="RUNNING")
    closed = subprocess.run(
        [str(BIN / "ragsweep-log"), str(run_dir)], capture_output=True, text=True, env=ENV
    )
    assert closed.returncode == 0, closed.stderr[-3000:]
    assert f"already logged as run {done.info.run_id}" in closed.stdout
    assert client.get_run(done.info.run_id).info.status == "FINISHED"

    fresh = copied_with_new_record(run_dir, tmp_path / "fresh")
    record_id = json.loads((fresh / RECORD_FILE).read_text(encoding="utf-8"))["record_id"]
    half = client.create_run(experiment, tags={tag.RECORD_ID: record_id})
    logged = subprocess.run(
        [str(BIN / "ragsweep-log"), str(fresh)], capture_output=True, text=True, env=ENV
    )
    assert logged.returncode == 0, logged.stderr[-3000:]
    assert client.get_run(half.info.run_id).info.status == "FAILED"
    complete = client.search_runs([experiment], filter_string=f"tags.`{tag.LOGGED}` = 'complete'")
    assert len(complete) == 2
    (new,) = [r for r in complete if r.info.run_id != done.info.run_id]
    assert f"logged as run {new.info.run_id}" in logged.stdout and "already" not in logged.stdout


def test_a_sweep_whose_runs_were_not_all_logged_exits_2_at_its_end(tmp_path: Path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / RECORD_FILE).write_text("{not json", encoding="utf-8")
    launcher = next(iter(IN_PROCESS_LAUNCHERS))
    hydra_cfg = OmegaConf.create(
        {"launcher": {"_target_": launcher}, "sweep": {"dir": str(tmp_path)}}
    )
    tracking = TrackingConfig(default_db=str(tmp_path / "mlflow.db"))
    err = io.StringIO()
    went_on = []
    with pytest.raises(SystemExit) as stopped, logging_jobs(tracking, hydra_cfg, err) as logger:
        assert logger is not None
        logger.submit(broken)
        went_on.append(True)
    assert stopped.value.code == 2
    assert went_on == [True]
    text = err.getvalue()
    assert f"log it with: ragsweep-log {broken.resolve()}" in text
    assert "1 run(s) of this sweep were not logged to MLflow" in text


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
    assert isinstance(logger.transport, Pipes)
    assert logger.transport.process.returncode == 0
    assert len(runs(tmp_path / "out")) == 2
