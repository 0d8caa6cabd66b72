"""A single run logged before it exits (its output a pipe) on a store and experiment that
exist: a logger process started with the run imports MLflow and logs it, the run's own
process never imports MLflow, and the run logged is the run the process would have logged
itself (issue 31)."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import mlflow
import pytest
from mlflow.store.db.utils import _get_latest_schema_revision
from mlflow.tracking import MlflowClient

from ragsweep.core import tags as tag
from ragsweep.tracking.log import LOG_FILE
from ragsweep.tracking.ready import experiment_is_ready
from ragsweep.tracking.schema_head import mlflow_schema_head
from tests.run.test_pipeline import project_overrides

BIN = Path(sys.executable).parent
VARYING_TAGS = (tag.RECORD_ID,)
NO_CACHE = "cache.enabled=false"  # both runs do every stage: the same timings are logged
NOT_OPENED = "store_seconds"
"""Opening the store is the logger's, not the run's: not timed, as in background logging."""


def ragsweep(
    tmp_path: Path, project: Path, *extra: str, multirun: bool = False
) -> subprocess.CompletedProcess[str]:
    """``ragsweep`` on the mini project with its output to a pipe; stderr also lists the
    modules the run's own process imported (``-X importtime``, not passed to children)."""
    store = [f"paths.output_dir={tmp_path / 'out'}", f"tracking.uri=sqlite:///{tmp_path}/m.db"]
    args = [*(["-m"] if multirun else []), *store, *project_overrides(project), *extra]
    return subprocess.run(
        [sys.executable, "-X", "importtime", str(BIN / "ragsweep"), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": ""},
        timeout=300,
    )


def imports_mlflow(stderr: str) -> bool:
    return re.search(r"\|\s+mlflow$", stderr, re.MULTILINE) is not None


@pytest.mark.slow  # creates a store, then four ragsweep processes
def test_a_run_on_a_ready_store_is_logged_by_the_logger_and_logs_the_same(
    tmp_path: Path, mini_project: Path
) -> None:
    first = ragsweep(tmp_path, mini_project, NO_CACHE)  # a new store: created in the process
    assert first.returncode == 0, first.stderr[-3000:]
    assert imports_mlflow(first.stderr)
    second = ragsweep(tmp_path, mini_project, NO_CACHE)
    assert second.returncode == 0, second.stderr[-3000:]
    assert not imports_mlflow(second.stderr)
    (output,) = (tmp_path / "out").rglob(LOG_FILE)  # the logger's output, in its run dir
    assert (output.parent / "record.json").is_file()

    client = MlflowClient(f"sqlite:///{tmp_path}/m.db")
    experiment = client.get_experiment_by_name("ragsweep")
    old, new = sorted(
        client.search_runs([experiment.experiment_id]), key=lambda r: r.info.start_time
    )
    assert new.info.run_id in second.stdout + second.stderr  # the summary names it
    assert new.info.status == "FINISHED" and new.data.tags[tag.LOGGED] == "complete"
    assert new.data.params == old.data.params
    assert set(new.data.metrics) == set(old.data.metrics) - {NOT_OPENED}
    timing = re.compile(r"(seconds|_s)$|latency")
    same = [k for k in new.data.metrics if not timing.search(k)]
    assert {k: new.data.metrics[k] for k in same} == {k: old.data.metrics[k] for k in same}
    kept = set(old.data.tags) - set(VARYING_TAGS)
    assert {k for k in new.data.tags if k in kept} == kept

    refused = ragsweep(tmp_path, mini_project, f"golden.path={tmp_path / 'missing.jsonl'}")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "missing.jsonl" in refused.stderr and not imports_mlflow(refused.stderr)
    assert len(client.search_runs([experiment.experiment_id])) == 2

    grid = ragsweep(tmp_path, mini_project, "chunking.size=100,120", multirun=True)
    assert grid.returncode == 0, grid.stderr[-3000:]
    assert not imports_mlflow(grid.stderr)  # its logger opened the store, and logged
    assert len(client.search_runs([experiment.experiment_id])) == 4


def test_a_store_at_another_schema_revision_is_refused_before_any_work(
    tmp_path: Path, mini_project: Path
) -> None:
    """A store whose ``alembic_version`` is not the installed MLflow's head is never left
    to a logger: refused in the run's process before any work, a single run and a grid."""
    uri = f"sqlite:///{tmp_path}/m.db"
    MlflowClient(uri).create_experiment("ragsweep")  # the store and experiment, at head
    head = _get_latest_schema_revision()
    assert mlflow_schema_head() == head
    versions = Path(mlflow.__file__).parent / "store" / "db_migrations" / "versions"
    older = re.search(
        r"^down_revision\s*=\s*['\"](\w+)", next(versions.glob(f"{head}_*.py")).read_text(), re.M
    )
    assert older is not None
    with closing(sqlite3.connect(tmp_path / "m.db")) as db, db:
        db.execute("UPDATE alembic_version SET version_num = ?", (older[1],))
    assert not experiment_is_ready(uri, "ragsweep")
    for multirun, extra in ((False, ()), (True, ("chunking.size=100,120",))):
        refused = ragsweep(tmp_path, mini_project, *extra, multirun=multirun)
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert "error: " in refused.stderr and "Traceback" not in refused.stderr
        assert "mlflow db upgrade" in refused.stderr and "m.db" in refused.stderr
        assert not list((tmp_path / "out").rglob("*.json")), "work was done before refusing"
