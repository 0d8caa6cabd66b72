"""The resident logger (:mod:`ragsweep.tracking.resident`, issue 31): with
``tracking.resident=true`` a run to a pipe and a grid log through one long-lived
``ragsweep-log --resident`` that later commands reuse; a store file replaced under it is
reopened, not written to in its deleted copy; a server killed mid-session is replaced by
logging in the command's process, nothing lost or logged twice; a folder others can enter
is refused for the per-command logger, with a note; an idle server exits; a command in
another working directory gets another server, one that has opened its store the same.

Every run is a real ``ragsweep`` process, every store a real SQLite file, every logger the
real process; each test has its own ``XDG_RUNTIME_DIR``, whose servers it stops.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ragsweep.config.schema import TrackingConfig
from ragsweep.core import locks
from ragsweep.core import tags as tag
from ragsweep.core.names import RECORD_FILE
from ragsweep.tracking.background import LOGGER_OUTPUT, Pipes, SweepLogger
from ragsweep.tracking.log import LOG_FILE, ensure_experiment, load_record
from ragsweep.tracking.resident import (
    FOLDER_NAME,
    Connection,
    Place,
    connect,
    private_folder,
    resident_key,
)
from ragsweep.tracking.store import HTTP_SETTINGS_ENV, apply_http_settings
from tests.run.test_pipeline import project_overrides

BIN = Path(sys.executable).parent
RESIDENT = "tracking.resident=true"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ready store (schema and experiment), created once and copied by each test."""
    folder = tmp_path_factory.mktemp("template")
    db = folder / "m.db"
    ensure_experiment(TrackingConfig(uri=f"sqlite:///{db}", default_artifacts=str(folder / "a")))
    return db


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This test's ``XDG_RUNTIME_DIR`` (also in this process's environment); every resident
    logger started in it is stopped at the end by removing its socket, as docs say."""
    folder = tmp_path / "x"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "")
    yield folder
    pids = [int(p.read_text()) for p in folder.glob(f"{FOLDER_NAME}/*.pid")]
    for socket_file in folder.glob(f"{FOLDER_NAME}/*.sock"):
        socket_file.unlink()
    for pid in pids:
        if not gone(pid, 5.0):
            os.kill(pid, signal.SIGKILL)


def gone(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` ends (or is reaped by init) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1]
        except OSError:
            return True
        if state == "Z":  # exited, a child of this process not reaped yet
            return True
        time.sleep(0.05)
    return False


def server_pid(runtime: Path) -> int:
    """The process id of the one resident logger started in ``runtime``, from its log (its
    pid file goes when it exits)."""
    (log,) = runtime.glob(f"{FOLDER_NAME}/*.log")
    starts = [line for line in log.read_text().splitlines() if line.startswith("listening on")]
    return int(starts[-1].rsplit(" ", 1)[1].rstrip(")"))


def store(tmp_path: Path, template: Path) -> Path:
    db = tmp_path / "m.db"
    shutil.copy(template, db)
    return db


def ragsweep(tmp_path: Path, project: Path, db: Path, *extra: str, multirun: bool = False) -> str:
    """``ragsweep`` on the mini project, its output a pipe; returns stdout + stderr."""
    args = [*(["-m"] if multirun else []), f"paths.output_dir={tmp_path / 'out'}"]
    args.append(f"tracking.uri=sqlite:///{db}")
    done = subprocess.run(
        [str(BIN / "ragsweep"), *args, *project_overrides(project), *extra],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def run_ids(db: Path) -> set[str]:
    """The runs in ``db``, every one logged completely (read with ``sqlite3``: MLflow's
    client in this process would keep the file it first opened)."""
    with closing(sqlite3.connect(db)) as connection:
        runs = connection.execute("SELECT run_uuid FROM runs").fetchall()
        complete = connection.execute(
            "SELECT run_uuid FROM tags WHERE key = ? AND value = ?", (tag.LOGGED, "complete")
        ).fetchall()
    assert sorted(runs) == sorted(complete)
    return {row[0] for row in runs}


def logged_lines(output: Path) -> list[str]:
    """The run ids an output file says were logged."""
    lines = output.read_text(encoding="utf-8").splitlines()
    return [line.rsplit(" ", 1)[1] for line in lines if ": logged as run " in line]


def server_logged(runtime: Path) -> list[str]:
    """The run ids the resident logger's own log says it logged (a command that fell back
    to a logger of its own writes the same lines to its output file, not there)."""
    (log,) = runtime.glob(f"{FOLDER_NAME}/*.log")
    return logged_lines(log)


def newest_log(tmp_path: Path) -> Path:
    return max((tmp_path / "out").rglob(LOG_FILE), key=lambda p: p.stat().st_mtime_ns)


def test_pipe_runs_share_one_server(
    tmp_path: Path, mini_project: Path, template: Path, runtime: Path
) -> None:
    db = store(tmp_path, template)
    ragsweep(tmp_path, mini_project, db, RESIDENT)
    first = newest_log(tmp_path)
    pid = server_pid(runtime)
    ragsweep(tmp_path, mini_project, db, RESIDENT, "chunking.size=100")
    second = newest_log(tmp_path)
    assert server_pid(runtime) == pid  # the same process logged both
    logged = [*logged_lines(first), *logged_lines(second)]
    assert len(logged) == 2 and set(logged) == run_ids(db)
    assert server_logged(runtime) == logged
    for output in (first, second):
        assert "logging through the resident MLflow logger" in output.read_text(encoding="utf-8")


@pytest.mark.slow  # five runs
def test_a_replaced_store_is_reopened(
    tmp_path: Path, mini_project: Path, template: Path, runtime: Path
) -> None:
    db = store(tmp_path, template)
    ragsweep(tmp_path, mini_project, db, RESIDENT)
    pid = server_pid(runtime)
    (before,) = run_ids(db)
    db.unlink()  # the user's `rm mlflow.db`: the next run creates it in its own process
    ragsweep(tmp_path, mini_project, db, RESIDENT)
    (created,) = run_ids(db)
    ragsweep(tmp_path, mini_project, db, RESIDENT, "chunking.size=100")
    assert server_pid(runtime) == pid  # the server that had the old file open
    (through_server,) = logged_lines(newest_log(tmp_path))
    assert server_logged(runtime) == [before, through_server]
    assert run_ids(db) == {created, through_server}
    assert before not in {created, through_server}


def test_a_grid_logs_through_it_and_it_exits_idle(
    tmp_path: Path, mini_project: Path, template: Path, runtime: Path
) -> None:
    db = store(tmp_path, template)
    sweep_dir = tmp_path / "grid"
    grid = ("chunking.size=100,140", f"hydra.sweep.dir={sweep_dir}")
    idle = "tracking.resident_idle_seconds=1"
    ragsweep(tmp_path, mini_project, db, RESIDENT, idle, *grid, multirun=True)
    logged = logged_lines(sweep_dir / LOGGER_OUTPUT)
    assert len(logged) == 2 and set(logged) == run_ids(db)
    assert sorted(server_logged(runtime)) == sorted(logged)
    assert gone(server_pid(runtime), 10.0)  # idle for a second: it exits, its files with it
    assert not list(runtime.glob(f"{FOLDER_NAME}/*.sock"))
    assert not list(runtime.glob(f"{FOLDER_NAME}/*.pid"))


def fresh_run_dirs(tmp_path: Path, project: Path, db: Path, count: int) -> list[Path]:
    """``count`` copies of a run directory (logged in its own process), each with a record
    never logged, and the store left as before."""
    ragsweep(tmp_path, project, db, "tracking.background=never")
    (run_dir,) = (tmp_path / "out" / "runs").glob("*/*")
    copies = []
    for number in range(count):
        copy = shutil.copytree(run_dir, tmp_path / f"fresh{number}")
        record = json.loads((copy / RECORD_FILE).read_text(encoding="utf-8"))
        record["record_id"] = uuid.uuid4().hex
        (copy / RECORD_FILE).write_text(json.dumps(record), encoding="utf-8")
        copies.append(copy)
    return copies


@pytest.mark.slow  # a run, then the server's start
def test_a_killed_server_s_runs_are_logged_here_once(
    tmp_path: Path, mini_project: Path, template: Path, runtime: Path
) -> None:
    db = store(tmp_path, template)
    dirs = fresh_run_dirs(tmp_path, mini_project, db, 3)
    (earlier,) = run_ids(db)
    tracking = TrackingConfig(uri=f"sqlite:///{db}", resident=True)
    logger = SweepLogger.start(tmp_path / "logger.txt", tracking)
    assert isinstance(logger.transport, Connection)
    logger.submit(dirs[0])
    (answered,) = logger.drain()
    os.kill(server_pid(runtime), signal.SIGKILL)
    logger.submit(dirs[1])
    logger.submit(dirs[2])
    rest = logger.close()
    assert [o.error for o in [answered, *rest]] == [None, None, None]
    ids = {answered.run_id, *(o.run_id for o in rest)}
    assert run_ids(db) == {earlier, *ids} and len(ids) == 3


def resident_session(output: Path, tracking: TrackingConfig, run_dir: Path) -> str:
    """Log ``run_dir`` in one session with the resident logger; its run id."""
    logger = SweepLogger.start(output, dataclasses.replace(tracking, resident=True))
    assert isinstance(logger.transport, Connection)
    logger.submit(run_dir)
    (logged,) = logger.close()
    assert logged.error is None and logged.run_id is not None
    return logged.run_id


@pytest.mark.slow  # a run, then the server's start
def test_a_session_looks_its_experiment_up_again(
    tmp_path: Path, mini_project: Path, template: Path, runtime: Path
) -> None:
    """The experiment renamed (MLflow's UI) and a new one of its name created between two
    sessions: the next run goes to the new one, not to the id the server found first."""
    db = store(tmp_path, template)
    first, second = fresh_run_dirs(tmp_path, mini_project, db, 2)
    tracking, _ = load_record(first)
    resident_session(tmp_path / "logger.txt", tracking, first)
    with closing(sqlite3.connect(db)) as connection, connection:
        renamed = "UPDATE experiments SET name = 'old' WHERE name = ?"
        connection.execute(renamed, (tracking.experiment,))
    created = ensure_experiment(tracking)  # as a run logged in its own process does
    run_id = resident_session(tmp_path / "logger.txt", tracking, second)
    with closing(sqlite3.connect(db)) as connection:
        query = "SELECT experiment_id FROM runs WHERE run_uuid = ?"
        (found,) = connection.execute(query, (run_id,)).fetchone()
    assert str(found) == created


def test_a_folder_others_can_enter_is_refused(
    tmp_path: Path, template: Path, runtime: Path
) -> None:
    (runtime / FOLDER_NAME).mkdir(mode=0o755)
    (runtime / FOLDER_NAME).chmod(0o755)
    db = store(tmp_path, template)
    output = tmp_path / "logger.txt"
    logger = SweepLogger.start(output, TrackingConfig(uri=f"sqlite:///{db}", resident=True))
    assert isinstance(logger.transport, Pipes)  # today's logger of the command's own
    assert logger.close() == []
    (note,) = output.read_text(encoding="utf-8").splitlines()
    assert note.startswith("note: not logging through the resident MLflow logger: ")
    assert "open to other users (mode 755)" in note
    assert not list(runtime.glob(f"{FOLDER_NAME}/*"))


def test_the_key_covers_the_working_directory_not_what_opening_a_store_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative ``sqlite:///mlflow.db`` in a record names a file in the logger's working
    directory: a server started elsewhere would log the run to another store. The
    ``MLFLOW_HTTP_REQUEST_*`` a sweep file sets when it opens its store before its logger
    starts must not part it from a single run's server."""
    for name in HTTP_SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)  # restored after the test
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
    monkeypatch.chdir(a)
    key = resident_key(a)
    apply_http_settings(TrackingConfig(timeout=3, retries=0))
    assert resident_key(a) == key
    monkeypatch.chdir(b)
    assert resident_key(a) != key
    monkeypatch.chdir(a)
    assert resident_key(a) == key
    assert resident_key(b) != key  # another user's salt: the same setup, another key
    for name, value in {
        "AWS_SECRET_ACCESS_KEY": "other",  # an artifact store's credentials
        "https_proxy": "http://127.0.0.1:9",
        "REQUESTS_CA_BUNDLE": "/etc/other.pem",
        "SSL_CERT_DIR": "/etc/other-certs",
        "HOME": str(b),  # another ~/.aws/credentials
        "MLFLOW_TRACKING_URI": "sqlite:///other.db",
    }.items():
        monkeypatch.setenv(name, value)
        assert resident_key(a) != key, name
        key = resident_key(a)
    monkeypatch.setenv("EDITOR", "vi")  # anything else: the same logger
    assert resident_key(a) == key


def test_kill_stops_it_as_removing_its_socket_does(runtime: Path) -> None:
    """docs/tracking.md: ``kill`` of the process id in its ``.pid`` file stops it after the
    request it is doing (not in the middle of a run), and its files go with it."""
    connection, place = connect(60)
    connection.close()
    pid = server_pid(runtime)
    os.kill(pid, signal.SIGTERM)
    assert gone(pid, 10.0)
    assert place.log.read_text(encoding="utf-8").splitlines()[-1] == "exiting"
    assert not place.pid.exists() and not place.socket.exists()


def test_one_started_while_another_stops_takes_over(runtime: Path) -> None:
    """A command that finds no socket while the logger whose socket was removed finishes
    its request (it still holds the lock) gets the next logger once that one has gone, not
    a wait of ``START_SECONDS`` and then a logger of its own."""
    folder = private_folder()
    place = Place.of(folder, resident_key(folder))
    with place.lock.open("a") as lock:
        locks.acquire(lock)  # the stopping logger's
        stops = threading.Timer(1.0, locks.release, args=(lock,))
        stops.start()
        connection, _ = connect(60)
        stops.join()
    connection.close()
