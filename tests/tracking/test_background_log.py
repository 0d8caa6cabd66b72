"""Background logging (``tracking.background``, issue 13): a single run at a terminal hands
its MLflow logging to a detached ``ragsweep-log`` and exits without importing MLflow; the
run lands completely; readers wait for it; a failed one is reported and can be logged again.

Every run is a real ``ragsweep`` process whose standard output is a pseudo-terminal, on a
real SQLite store; the background logger is the real detached process.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.core import tags as tag
from ragsweep.tracking.log import LOG_FILE
from tests.eval.test_case_table import NO_MLFLOW, project

BIN = Path(sys.executable).parent
ENV = {**os.environ, "MLFLOW_TRACKING_URI": ""}


def at_terminal(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``ragsweep ARGS`` (through :data:`NO_MLFLOW`, which reports the MLflow modules it
    imported) with its stdout on a pseudo-terminal, as a user runs it; stderr captured;
    ``env``: its environment (:data:`ENV`)."""
    controller, terminal = pty.openpty()
    shown: list[bytes] = []

    def drain() -> None:
        try:
            while chunk := os.read(controller, 65536):
                shown.append(chunk)
        except OSError:
            return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        done = subprocess.run(
            [sys.executable, "-c", NO_MLFLOW, *args],
            cwd=cwd,
            stdout=terminal,
            stderr=subprocess.PIPE,
            text=True,
            env=env or ENV,
            timeout=300,
        )
    finally:
        os.close(terminal)
        reader.join(timeout=5)
        os.close(controller)
    return subprocess.CompletedProcess(
        done.args, done.returncode, b"".join(shown).decode(), done.stderr
    )


def run(cwd: Path, command: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / command), *args], cwd=cwd, capture_output=True, text=True, env=ENV, timeout=300
    )


@pytest.fixture
def store(tmp_path: Path, mini_project: Path) -> Path:
    """An output folder whose SQLite store exists (one run logged in-process)."""
    out = tmp_path / "out"
    first = run(tmp_path, "ragsweep", f"paths.output_dir={out}", *project(mini_project))
    assert first.returncode == 0, first.stderr[-3000:]
    return out


def _client(out: Path) -> MlflowClient:
    return MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")


def _newest_run_dir(out: Path) -> Path:
    return max((out / "runs").glob("*/*"), key=lambda p: p.stat().st_mtime)


def _logged(out: Path, record_id: str) -> list[object]:
    client = _client(out)
    experiment = client.get_experiment_by_name("ragsweep")
    assert experiment is not None
    return client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`{tag.RECORD_ID}` = '{record_id}'"
    )


def test_a_run_at_a_terminal_exits_before_mlflow_and_its_run_lands_completely(
    tmp_path: Path, mini_project: Path, store: Path
) -> None:
    out = at_terminal(tmp_path, f"paths.output_dir={store}", *project(mini_project))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "mlflow modules: []" in out.stderr  # the run's own process never imported MLflow
    run_dir = _newest_run_dir(store)
    assert f"ragsweep-log --wait {run_dir}" in out.stderr
    assert "being logged in the background" in out.stderr  # the summary's run line

    waited = run(tmp_path, "ragsweep-log", "--wait", str(run_dir))
    assert waited.returncode == 0, waited.stderr[-3000:]
    record = json.loads((run_dir / "record.json").read_text(encoding="utf-8"))
    (logged,) = _logged(store, record["record_id"])
    assert f"{run_dir}: logged as run {logged.info.run_id}" in waited.stdout
    assert logged.info.status == "FINISHED"
    assert logged.data.tags[tag.LOGGED] == "complete"
    assert logged.data.metrics == pytest.approx(record["metrics"])
    assert logged.data.params == record["params"]
    assert record["tags"].items() <= logged.data.tags.items()
    uploaded = {a.path for a in _client(store).list_artifacts(logged.info.run_id)}
    assert {"cases.jsonl.gz", "cases_table.json", "config.yaml"} <= uploaded
    assert not {"chunks.jsonl", "chunks.jsonl.gz"} & uploaded  # stays local (artifact budget)
    assert LOG_FILE not in uploaded and "record.json" not in uploaded
    assert f"logged as run {logged.info.run_id}" in (run_dir / LOG_FILE).read_text()
    assert not list((store / "mlflow.db.pending").glob("*"))  # the marker is gone

    # A script (stdout not a terminal) keeps logging in-process: it can read the store next.
    piped = run(tmp_path, "ragsweep", f"paths.output_dir={store}", *project(mini_project))
    assert piped.returncode == 0 and "background" not in piped.stderr
    record = json.loads((_newest_run_dir(store) / "record.json").read_text(encoding="utf-8"))
    assert len(_logged(store, record["record_id"])) == 1


def test_inside_a_scheduler_s_job_a_run_at_a_terminal_logs_in_its_own_process(
    tmp_path: Path, mini_project: Path, store: Path
) -> None:
    # srun --pty ends every process of the step when the run exits: a detached logger
    # would die with it, so the run is logged before it exits (by the logger it started
    # with it and waits for, issue 31: MLflow is still not imported by the run's process)
    slurm = {**ENV, "SLURM_JOB_ID": "4242"}
    out = at_terminal(tmp_path, f"paths.output_dir={store}", *project(mini_project), env=slurm)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "being logged in the background" not in out.stderr
    assert "mlflow modules: []" in out.stderr
    run_dir = _newest_run_dir(store)
    record = json.loads((run_dir / "record.json").read_text(encoding="utf-8"))
    (logged,) = _logged(store, record["record_id"])  # there when the run has exited
    assert logged.data.tags[tag.LOGGED] == "complete"
    assert (run_dir / LOG_FILE).is_file()  # the output of the logger it waited for


def test_readers_wait_for_a_background_log_still_running(
    tmp_path: Path, mini_project: Path, store: Path
) -> None:
    # Holding the store's lock keeps the background logger from opening the store, so its
    # log stays pending for as long as this test wants.
    with (store / "mlflow.db.store.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = at_terminal(tmp_path, f"paths.output_dir={store}", *project(mini_project))
        assert out.returncode == 0, out.stderr[-3000:]
        run_dir = _newest_run_dir(store)
        progress = tmp_path / "compare.err"
        with progress.open("w") as err:
            reader = subprocess.Popen(
                [str(BIN / "ragsweep-log"), "--wait", str(run_dir)],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=ENV,
            )
            deadline = time.monotonic() + 60
            while "waiting for 1 background MLflow log" not in progress.read_text():
                assert reader.poll() is None, progress.read_text()
                assert time.monotonic() < deadline, "the reader never said it waits"
                time.sleep(0.1)
            time.sleep(1)
            assert reader.poll() is None  # still waiting: the log has not landed
            fcntl.flock(lock, fcntl.LOCK_UN)
            stdout, _ = reader.communicate(timeout=300)
    assert reader.returncode == 0, progress.read_text()[-3000:]
    record = json.loads((run_dir / "record.json").read_text(encoding="utf-8"))
    (logged,) = _logged(store, record["record_id"])
    assert f"logged as run {logged.info.run_id}" in stdout
    assert logged.data.tags[tag.LOGGED] == "complete"


def test_a_failed_background_log_is_reported_by_the_next_command_and_can_be_logged_again(
    tmp_path: Path, mini_project: Path, store: Path
) -> None:
    artifacts = store / "mlartifacts"
    artifacts.rename(store / "mlartifacts.aside")
    artifacts.write_text("a file where the artifact folder should be\n")  # fails even as root
    out = at_terminal(tmp_path, f"paths.output_dir={store}", *project(mini_project))
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = _newest_run_dir(store)

    waited = run(tmp_path, "ragsweep-log", "--wait", str(run_dir))
    assert waited.returncode == 2
    assert f"the background MLflow log of {run_dir} did not finish" in waited.stderr
    assert f"ragsweep-log {run_dir}" in waited.stderr
    assert "error:" in (run_dir / LOG_FILE).read_text()

    # The next command that touches the store reports it too: an in-process run (a script),
    # and the next run at a terminal (whose own log lands).
    artifacts.unlink()
    (store / "mlartifacts.aside").rename(artifacts)
    script = run(tmp_path, "ragsweep", f"paths.output_dir={store}", *project(mini_project))
    assert script.returncode == 0, script.stderr[-3000:]
    assert f"the background MLflow log of {run_dir} did not finish" in script.stderr
    again = at_terminal(tmp_path, f"paths.output_dir={store}", *project(mini_project))
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"the background MLflow log of {run_dir} did not finish" in again.stderr
    assert run(tmp_path, "ragsweep-log", "--wait", str(_newest_run_dir(store))).returncode == 0

    relogged = run(tmp_path, "ragsweep-log", str(run_dir))
    assert relogged.returncode == 0, relogged.stderr[-3000:]
    record = json.loads((run_dir / "record.json").read_text(encoding="utf-8"))
    complete = [
        r for r in _logged(store, record["record_id"]) if r.data.tags.get(tag.LOGGED) == "complete"
    ]
    assert len(complete) == 1 and complete[0].info.status == "FINISHED"
    assert f"logged as run {complete[0].info.run_id}" in relogged.stdout
    assert not list((store / "mlflow.db.pending").glob("*"))
    quiet = run(tmp_path, "ragsweep-log", "--wait", str(run_dir))
    assert quiet.returncode == 0 and "did not finish" not in quiet.stderr


def _marker(store_db: Path, record_id: str, run_dir: Path) -> Path:
    folder = store_db.with_name(f"{store_db.name}.pending")
    folder.mkdir(exist_ok=True)
    marker = folder / f"{record_id}.json"
    marker.write_text(json.dumps({"run_dir": str(run_dir), "log": str(run_dir / LOG_FILE)}))
    return marker


def test_an_ended_log_is_reported_unless_its_marker_went_or_its_run_directory_is_gone(
    tmp_path: Path,
) -> None:
    from ragsweep.tracking.store import report_failed

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    kept = tmp_path / "runs" / "kept"
    kept.mkdir(parents=True)
    (kept / "record.json").write_text("{}")
    failed = _marker(tmp_path / "mlflow.db", "a" * 32, kept)
    gone = _marker(tmp_path / "mlflow.db", "b" * 32, tmp_path / "runs" / "deleted")
    running = _marker(tmp_path / "mlflow.db", "c" * 32, kept)
    with running.open("r") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a live logger holds it
        out = io.StringIO()
        reported = report_failed(uri, out)
    assert [f.run_dir for f in reported] == [str(kept)]  # the failed one only
    assert f"the background MLflow log of {kept} did not finish" in out.getvalue()
    assert "is gone; nothing is left to log, forgotten" in out.getvalue()
    assert failed.is_file() and running.is_file() and not gone.exists()
    again = io.StringIO()
    assert len(report_failed(uri, again)) == 2  # the deleted one is not said twice
    assert "forgotten" not in again.getvalue()


def test_a_store_on_a_network_file_system_is_logged_in_the_run_s_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragsweep.tracking import ready
    from ragsweep.tracking.ready import filesystem_type, store_is_ready

    mountinfo = (
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        f"31 22 0:42 / {tmp_path}/team\\040share rw,relatime shared:9 - nfs4 srv:/t rw\n"
    )
    assert filesystem_type(tmp_path / "team share" / "mlflow.db", mountinfo) == "nfs4"
    assert filesystem_type(tmp_path / "team" / "mlflow.db", mountinfo) == "ext4"
    share = tmp_path / "team share"
    share.mkdir()
    db = share / "mlflow.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")  # a real, complete store
    client.search_experiments()
    assert store_is_ready(f"sqlite:///{db}")
    (tmp_path / "mountinfo").write_text(mountinfo)
    monkeypatch.setattr(ready, "MOUNTINFO", tmp_path / "mountinfo")
    assert not store_is_ready(f"sqlite:///{db}")
