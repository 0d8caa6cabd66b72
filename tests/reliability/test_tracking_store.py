"""Concurrent processes on one SQLite store, and stores MLflow left half-created (issue 12,
item 1).

MLflow 3.17 creates and migrates a SQLite store without any lock between processes; started
together on a new store, ragsweep processes crashed inside the migrations and could leave the
file broken for good (``table _alembic_tmp_experiments already exists``). Here real
``ragsweep`` processes (single runs, a grid, a sweep, promotions) start at once on one store,
and broken stores are made by running MLflow's own migration and stopping it where a crashed
process stops (right after it created an ``_alembic_tmp_*`` table).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.config.schema import TrackingConfig
from ragsweep.core import tags as tag
from ragsweep.tracking.store import TMP_PREFIX, prepare_store
from tests.run.test_pipeline import project_overrides

BIN = Path(sys.executable).parent
SWEEP = "axes:\n  - chunking.size: [120, 160]\n"  # 120: the baseline, so 2 jobs
OLD_RUN = "a" * 32


def start(tool: str, *args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": ""}
    return subprocess.Popen(
        [str(BIN / tool), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
    )


def finish(processes: list[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    """Wait for every process; return (exit status, stderr) of each."""
    results = []
    for process in processes:
        _, err = process.communicate(timeout=600)
        results.append((process.returncode, err))
    return results


def store_runs(db: Path) -> list[Any]:
    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("ragsweep")
    return list(client.search_runs([experiment.experiment_id], max_results=1000))


def assert_all_succeeded(results: list[tuple[int, str]]) -> None:
    for status, err in results:
        assert status == 0, err[-3000:]
        assert "Traceback" not in err and "database is locked" not in err, err[-3000:]


@pytest.mark.slow  # 5 processes (7 runs) at once on 2 cores, then 3 more
def test_processes_started_together_all_log_completely(tmp_path: Path, mini_project: Path):
    db = tmp_path / "store" / "mlflow.db"  # does not exist yet
    sweep = tmp_path / "mini.yaml"
    sweep.write_text(SWEEP, encoding="utf-8")
    common = [f"tracking.uri=sqlite:///{db}", *project_overrides(mini_project)]

    def out(name: str) -> str:
        return f"paths.output_dir={tmp_path / name}"

    first = [start("ragsweep", out(f"single{i}"), *common, cwd=tmp_path) for i in range(3)]
    first.append(
        start("ragsweep", "-m", out("grid"), *common, "preprocess=none,nfkc", cwd=tmp_path)
    )
    first.append(start("ragsweep", "-m", out("sweep"), *common, f"sweep={sweep}", cwd=tmp_path))
    assert_all_succeeded(finish(first))

    runs = store_runs(db)
    parents = [r for r in runs if r.data.tags.get(tag.SWEEP_ROLE) == "parent"]
    evaluations = [r for r in runs if r.data.tags.get(tag.SWEEP_ROLE) != "parent"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(evaluations) == 3 + 2 + 2  # singles, grid jobs, sweep children
    assert all(r.info.status == "FINISHED" for r in evaluations)
    assert all(r.data.tags.get(tag.LOGGED) == "complete" for r in evaluations)
    assert not [t for t in tables(db) if t.startswith(TMP_PREFIX)]

    # the store exists now: promotions of two of the runs and two more runs, all at once
    uri = ["--tracking-uri", f"sqlite:///{db}"]
    tuning = [r.info.run_id for r in evaluations[:2]]
    second = [
        start(
            "ragsweep-promote",
            run_id,
            *uri,
            "--output-dir",
            str(tmp_path / f"p{run_id}"),
            cwd=tmp_path,
        )
        for run_id in tuning
    ]
    second.append(start("ragsweep", out("more"), *common, cwd=tmp_path))
    assert_all_succeeded(finish(second))
    runs = store_runs(db)
    assert len(runs) == 1 + 7 + 2 + 1
    holdout = [r for r in runs if r.data.tags.get(tag.PROMOTED_FROM)]
    assert sorted(r.data.tags[tag.PROMOTED_FROM] for r in holdout) == sorted(tuning)
    assert all(
        r.info.status == "FINISHED" and r.data.tags.get(tag.LOGGED) == "complete"
        for r in runs
        if r.data.tags.get(tag.SWEEP_ROLE) != "parent"
    )


# --- stores MLflow left half-created ------------------------------------------------------


class MigrationCut(Exception):
    """Raised inside MLflow's migration where a crashed process would have stopped."""


def half_migrated_store(path: Path, cut_at: int) -> None:
    """Create a SQLite store with MLflow's own schema setup and stop it right after it
    created its ``cut_at``-th ``_alembic_tmp_*`` table (the crash of the concurrent case)."""
    from mlflow.store.db.utils import _initialize_tables, create_sqlalchemy_engine_with_retry
    from sqlalchemy import event

    engine = create_sqlalchemy_engine_with_retry(f"sqlite:///{path}")
    created: list[str] = []

    def cut(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith(f"CREATE TABLE {TMP_PREFIX.upper()}"):
            created.append(statement)
            if len(created) == cut_at:
                raise MigrationCut(statement.split("(")[0])

    event.listen(engine, "after_cursor_execute", cut)
    with pytest.raises(MigrationCut):
        _initialize_tables(engine)
    engine.dispose()


def tables(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as db:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def insert(db: sqlite3.Connection, table: str, row: dict[str, Any]) -> None:
    """Insert ``row``'s values for the columns ``table`` has at this schema version."""
    columns = {r[1] for r in db.execute(f'PRAGMA table_info("{table}")')}
    keys = [k for k in row if k in columns]
    marks = ", ".join("?" for _ in keys)
    db.execute(
        f'INSERT INTO "{table}" ({", ".join(keys)}) VALUES ({marks})', [row[k] for k in keys]
    )


def add_old_run(path: Path) -> None:
    """A run logged before the migration crashed: an experiment, a run and a tag."""
    with closing(sqlite3.connect(path)) as db:
        insert(db, "experiments", {"experiment_id": 7, "name": "old", "lifecycle_stage": "active"})
        insert(
            db,
            "runs",
            {
                "run_uuid": OLD_RUN,
                "name": "before-the-crash",
                "source_type": "LOCAL",
                "source_name": "",
                "user_id": "test",
                "status": "FINISHED",
                "start_time": 1,
                "end_time": 2,
                "lifecycle_stage": "active",
                "artifact_uri": "file:///nowhere",
                "experiment_id": 7,
            },
        )
        insert(db, "tags", {"key": "kept", "value": "yes", "run_uuid": OLD_RUN})
        db.commit()


def mlflow_cannot_open(path: Path, tmp_path: Path) -> str:
    """MLflow itself on a copy of ``path``: the error it fails with."""
    copy = tmp_path / "plain-mlflow-copy.db"
    shutil.copyfile(path, copy)
    with pytest.raises(Exception) as error:  # whatever MLflow raises
        MlflowClient(f"sqlite:///{copy}")
    return str(error.value).splitlines()[0]


@pytest.fixture(scope="module")
def half_migrated(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int, Path], Path]:
    """``copy(cut_at, folder)``: a copy in ``folder`` of a store cut at ``cut_at`` (each
    cut is made once per module: MLflow's migrations take seconds)."""
    made: dict[int, Path] = {}

    def copy(cut_at: int, folder: Path) -> Path:
        if cut_at not in made:
            made[cut_at] = tmp_path_factory.mktemp(f"cut{cut_at}") / "mlflow.db"
            half_migrated_store(made[cut_at], cut_at)
        target = folder / "mlflow.db"
        shutil.copyfile(made[cut_at], target)
        return target

    return copy


@pytest.mark.slow  # a full schema migration and a ragsweep process
@pytest.mark.parametrize("cut_at", [1, 3])
def test_a_half_created_store_without_runs_is_created_again(
    tmp_path: Path, mini_project: Path, half_migrated: Callable[[int, Path], Path], cut_at: int
) -> None:
    db = half_migrated(cut_at, tmp_path)
    error = mlflow_cannot_open(db, tmp_path)
    assert "already exists" in error or "duplicate column" in error

    done = subprocess.run(
        [
            str(BIN / "ragsweep"),
            f"paths.output_dir={tmp_path / 'out'}",
            f"tracking.uri=sqlite:///{db}",
            *project_overrides(mini_project),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": ""},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"note: the MLflow store {db} was left half-created" in done.stderr
    (backup,) = tmp_path.glob("mlflow.db.broken-*")
    assert f"moved to {backup}" in done.stderr
    (logged,) = store_runs(db)
    assert logged.info.status == "FINISHED" and logged.data.tags[tag.LOGGED] == "complete"


def test_a_leftover_copy_in_a_store_with_runs_is_dropped_and_the_runs_kept(
    tmp_path: Path, half_migrated: Callable[[int, Path], Path]
) -> None:
    db = half_migrated(3, tmp_path)
    add_old_run(db)
    leftovers = sorted(t for t in tables(db) if t.startswith(TMP_PREFIX))
    assert leftovers and "already exists" in mlflow_cannot_open(db, tmp_path)

    prepare_store(TrackingConfig(uri=f"sqlite:///{db}", experiment="after"))

    assert not [t for t in tables(db) if t.startswith(TMP_PREFIX)]
    client = MlflowClient(f"sqlite:///{db}")
    old = client.get_run(OLD_RUN)
    assert old.info.run_name == "before-the-crash" and old.data.tags["kept"] == "yes"
    new = client.create_run(client.get_experiment_by_name("after").experiment_id)
    assert client.get_run(new.info.run_id).info.status == "RUNNING"
    assert not list(tmp_path.glob("mlflow.db.broken-*"))  # repaired in place


def test_a_cut_off_table_swap_is_reported_with_what_to_do(
    tmp_path: Path, mini_project: Path, half_migrated: Callable[[int, Path], Path]
) -> None:
    db = half_migrated(3, tmp_path)
    add_old_run(db)
    # the batch migration's next steps: drop the original table, then rename the copy
    # into place; stop between the two, so the rows exist only in the copy
    (leftover,) = [t for t in tables(db) if t.startswith(TMP_PREFIX)]
    original = leftover.removeprefix(TMP_PREFIX)
    with closing(sqlite3.connect(db)) as conn:
        conn.execute(f'DROP TABLE "{leftover}"')
        conn.execute(f'ALTER TABLE "{original}" RENAME TO "{leftover}"')
        conn.commit()
    before = db.read_bytes()

    done = subprocess.run(
        [
            str(BIN / "ragsweep"),
            f"paths.output_dir={tmp_path / 'out'}",
            f"tracking.uri=sqlite:///{db}",
            *project_overrides(mini_project),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": ""},
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"error: the MLflow store {db} holds runs" in done.stderr
    assert f"its rows are only in {leftover}. Restore a backup of {db}" in done.stderr
    assert f"ALTER TABLE {leftover} RENAME TO {original}" in done.stderr
    assert "Traceback" not in done.stderr
    assert db.read_bytes() == before  # nothing was changed
    assert not list((tmp_path / "out").rglob("cases.jsonl"))  # and no work was done
