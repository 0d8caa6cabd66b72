"""A team tracking server (issue 17): PostgreSQL from Debian's packages, ``mlflow server`` on
it with served artifacts, and ragsweep's workers logging over HTTP, as docs/deploy.md sets
it up. Everything is real and on 127.0.0.1; the server and the database are stopped after
the module, also when a test fails.

- the demo sweep (``sweep=chunking``) with 4 joblib workers: every run logged once and
  completely, every artifact stored by the server and downloaded unchanged;
- an interrupted sweep resumed through the server;
- ``ragsweep-promote --best`` and ``ragsweep-compare`` against the server;
- parallel jobs logging the same golden set: PostgreSQL reports the unique-key race in its
  own words, and every run still gets its dataset input.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow.tracking import MlflowClient

from ragsweep.core import tags as tag
from ragsweep.eval.case_table import SHOWN_FIELDS
from ragsweep.tracking.log import DatasetInput, _log_dataset
from tests.run.test_pipeline import project_overrides
from tests.sweep.test_sweep import MINI_SWEEP, Interrupt, multirun, write_sweep
from tests.team_server import PostgresCluster, TeamServer, postgres_bin

pytestmark = pytest.mark.postgres

BIN = Path(sys.executable).parent
EXPERIMENT = "team"
OBJECTIVE = "recall_at_2000c"  # sweeps/chunking.yaml
PARENT_FILES = ("sweep_result.yaml", "sweep_summary.md", "objective_by_axis.png")


def run_tool(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A ragsweep console script as a worker runs it: the store only from its arguments."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": ""}
    return subprocess.run(
        [str(BIN / tool), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=900
    )


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresCluster]:
    bindir = postgres_bin()
    if bindir is None:
        message = (
            "PostgreSQL is not installed and cannot be installed here (apt-get install postgresql)"
        )
        if os.environ.get("RAGSWEEP_REQUIRE_POSTGRES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    with PostgresCluster(bindir) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def team_server(
    postgres: PostgresCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TeamServer]:
    backend = postgres.create_database("mlflow", "ragsweep")
    with TeamServer(tmp_path_factory.mktemp("team-server"), backend) as server:
        yield server


@dataclass(frozen=True)
class Sweep:
    """The demo sweep, run once into the team server by one worker with 4 processes."""

    work: Path
    out: subprocess.CompletedProcess[str]
    client: MlflowClient
    experiment_id: str
    parent: Any
    children: list[Any]


@pytest.fixture(scope="module")
def team_sweep(team_server: TeamServer, tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    work = tmp_path_factory.mktemp("worker")
    out = run_tool(
        "ragsweep",
        "-m",
        "sweep=chunking",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=4",
        f"tracking.uri={team_server.uri}",
        f"tracking.experiment={EXPERIMENT}",
        f"paths.output_dir={work / 'outputs'}",
        f"hydra.sweep.dir={work / 'multirun'}",
        cwd=work,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    client = MlflowClient(team_server.uri)
    experiment_id = client.get_experiment_by_name(EXPERIMENT).experiment_id
    runs = client.search_runs([experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get(tag.SWEEP_ROLE) == "parent"]
    assert len(parents) == 1, [r.data.tags for r in runs]
    children = [r for r in runs if r.info.run_id != parents[0].info.run_id]
    return Sweep(work, out, client, experiment_id, parents[0], children)


def test_a_parallel_sweep_logs_every_run_once_and_completely(team_sweep: Sweep) -> None:
    out = team_sweep.out
    assert "Traceback" not in out.stderr
    launched = re.search(r"launched (\d+) job\(s\): 0 failed", out.stdout)
    assert launched is not None, out.stdout[-2000:]
    assert team_sweep.parent.info.status == "FINISHED"
    children = team_sweep.children
    assert len(children) == int(launched.group(1)) == 9  # 12 values, 3 carried forward
    parent_id = team_sweep.parent.info.run_id
    for child in children:
        assert child.info.status == "FINISHED"
        assert child.data.tags[tag.LOGGED] == "complete"
        assert child.data.tags[tag.PARENT_RUN_ID] == parent_id
        assert {OBJECTIVE, "recall_at_5", "mrr", "n_cases"} <= child.data.metrics.keys()
        assert not any(key.startswith("tracking.") for key in child.data.params)  # not a result
        (dataset,) = child.inputs.dataset_inputs
        assert dataset.dataset.digest == child.data.tags[tag.GOLDEN_DIGEST][:32]
    hashes = [c.data.tags[tag.CONFIG_HASH] for c in children]
    assert len(set(hashes)) == len(hashes)  # each configuration once

    result = yaml.safe_load((team_sweep.work / "multirun" / "sweep_result.yaml").read_text())
    assert result["complete"] is True
    objectives = {c.info.run_id: c.data.metrics[OBJECTIVE] for c in children}
    assert objectives[result["final"]["run_id"]] == result["final"]["objective"]
    best = [c for c in children if c.data.tags.get(tag.BEST) == "true"]
    assert [c.info.run_id for c in best] == [result["final"]["run_id"]]


def artifact_files(client: MlflowClient, run_id: str, path: str | None = None) -> set[str]:
    """Every artifact file of ``run_id`` below ``path``, listed by the server."""
    found: set[str] = set()
    for entry in client.list_artifacts(run_id, path):
        found |= artifact_files(client, run_id, entry.path) if entry.is_dir else {entry.path}
    return found


def files_below(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


COMPRESSED = ("cases.jsonl",)
"""Run-directory files the store holds gzip-compressed, as ``NAME.gz`` (docs/tracking.md);
``cases.jsonl`` without what its table shows."""
LOCAL_ONLY = ("chunks.jsonl", "record.json")
"""Run-directory files not uploaded (docs/tracking.md, "Artifact budget")."""


def stored_files(run_dir: Path) -> dict[str, Path]:
    """Artifact path → the run-directory file it holds: every file but ``record.json`` and
    empty ones (Hydra's ``cli.log``), the :data:`COMPRESSED` ones under ``NAME.gz``."""
    stored: dict[str, Path] = {}
    for name in files_below(run_dir):
        path = run_dir / name
        if path.name in LOCAL_ONLY or path.stat().st_size == 0:
            continue
        stored[f"{name}.gz" if name in COMPRESSED else name] = path
    return stored


def stored_content(path: Path) -> bytes:
    """A stored artifact's bytes, decompressed when it is one of the :data:`COMPRESSED`."""
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.suffix == ".gz" else raw


def expected_content(source: Path) -> bytes:
    """What the store holds of run-directory file ``source``: its bytes, for ``cases.jsonl``
    each row without the fields its table shows."""
    if source.name != "cases.jsonl":
        return source.read_bytes()
    lines = source.read_text(encoding="utf-8").splitlines()
    rows = ({k: v for k, v in json.loads(line).items() if k not in SHOWN_FIELDS} for line in lines)
    return "".join(
        json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows
    ).encode("utf-8")


def test_every_artifact_is_stored_by_the_server_and_downloads_unchanged(
    team_sweep: Sweep, team_server: TeamServer, tmp_path: Path
) -> None:
    client = team_sweep.client
    experiment = client.get_experiment(team_sweep.experiment_id)
    assert experiment.artifact_location == f"mlflow-artifacts:/{team_sweep.experiment_id}"
    assert not (team_sweep.work / "outputs" / "mlartifacts").exists()  # nothing local
    multirun = team_sweep.work / "multirun"
    run_dirs = {
        json.loads(p.read_text(encoding="utf-8"))["record_id"]: p.parent
        for p in multirun.glob("*/record.json")
    }
    assert len(run_dirs) == len(team_sweep.children)
    for child in team_sweep.children:
        run_id = child.info.run_id
        run_dir = run_dirs[child.data.tags[tag.RECORD_ID]]
        assert {"cases.jsonl", "chunks.jsonl", "config.yaml", "record.json"} <= files_below(run_dir)
        expected = stored_files(run_dir)
        assert {"cases.jsonl.gz", "cases_table.json", "config.yaml"} <= expected.keys()
        assert artifact_files(client, run_id) == expected.keys()
        stored = team_server.artifacts / team_sweep.experiment_id / run_id / "artifacts"
        assert files_below(stored) == expected.keys()
        downloaded = Path(client.download_artifacts(run_id, "", str(tmp_path / run_id)))
        for name, source in expected.items():
            assert stored_content(downloaded / name) == expected_content(source), name

    parent_id = team_sweep.parent.info.run_id
    assert set(PARENT_FILES) <= artifact_files(client, parent_id)
    for name in PARENT_FILES:
        downloaded = Path(client.download_artifacts(parent_id, name, str(tmp_path / "parent")))
        assert downloaded.read_bytes() == (multirun / name).read_bytes(), name


def test_promote_best_and_compare_work_against_the_server(
    team_sweep: Sweep, team_server: TeamServer
) -> None:
    uri = ["--tracking-uri", team_server.uri]
    promoted = run_tool("ragsweep-promote", "--best", *uri, cwd=team_sweep.work)
    assert promoted.returncode == 0, promoted.stderr[-3000:]
    holdout_id = promoted.stdout.strip().splitlines()[-1]
    client = team_sweep.client
    holdout = client.get_run(holdout_id)
    (best,) = [c for c in team_sweep.children if c.data.tags.get(tag.BEST) == "true"]
    assert holdout.info.status == "FINISHED"
    assert holdout.data.tags[tag.LOGGED] == "complete"
    assert holdout.data.tags[tag.SPLIT] == "holdout"
    assert holdout.data.tags[tag.PROMOTED_FROM] == best.info.run_id
    assert {"cases.jsonl.gz", "config.yaml"} <= artifact_files(client, holdout_id)

    baseline = min(team_sweep.children, key=lambda c: c.data.metrics[OBJECTIVE])
    compared = run_tool(
        "ragsweep-compare", baseline.info.run_id, best.info.run_id, *uri, cwd=team_sweep.work
    )
    assert compared.returncode == 0, compared.stderr[-3000:]
    assert OBJECTIVE in compared.stdout
    logged = client.get_run(best.info.run_id).data.tags
    assert logged[tag.COMPARED_WITH] == baseline.info.run_id


def test_an_interrupted_sweep_resumes_through_the_server(
    team_server: TeamServer, tmp_path: Path, mini_project: Path
) -> None:
    sweep = write_sweep(tmp_path, MINI_SWEEP)
    args = [
        f"sweep={sweep}",
        f"tracking.uri={team_server.uri}",
        "tracking.experiment=team-resume",
        *project_overrides(mini_project),
    ]
    with pytest.raises(KeyboardInterrupt):
        multirun(Interrupt(size=200), tmp_path, "first", *args)
    out = run_tool(
        "ragsweep",
        "-m",
        *args,
        f"paths.output_dir={tmp_path / 'outputs'}",
        f"hydra.sweep.dir={tmp_path / 'again'}",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    client = MlflowClient(team_server.uri)
    experiment_id = client.get_experiment_by_name("team-resume").experiment_id
    (parent,) = client.search_runs([experiment_id], f"tags.`{tag.SWEEP_ROLE}` = 'parent'")
    assert f"resuming sweep mini (parent run {parent.info.run_id})" in out.stdout
    assert parent.info.status == "FINISHED"
    children = client.search_runs(
        [experiment_id], f"tags.`{tag.PARENT_RUN_ID}` = '{parent.info.run_id}'"
    )
    finished = [c for c in children if c.info.status == "FINISHED"]
    hashes = [c.data.tags[tag.CONFIG_HASH] for c in finished]
    assert len(hashes) == 3 and len(set(hashes)) == 3  # none, nfkc, nfkc + size 200


def test_parallel_jobs_logging_one_golden_set_all_get_it_on_postgresql(
    team_server: TeamServer, tmp_path: Path
) -> None:
    """MLflow looks a dataset up, then inserts it: jobs logging a new golden set at the same
    instant race on the datasets table's key, which PostgreSQL reports as "duplicate key
    value violates unique constraint" (6 of 24 such calls failed before ragsweep knew it)."""
    client = MlflowClient(team_server.uri)
    experiment_id = client.create_experiment("team-datasets")
    golden = tmp_path / "golden.jsonl"
    golden.write_text("{}\n", encoding="utf-8")
    errors: list[BaseException] = []
    for round_ in range(3):
        dataset = DatasetInput(str(golden), "golden", f"{round_:032d}", "tuning")
        run_ids = [client.create_run(experiment_id).info.run_id for _ in range(8)]
        start = threading.Barrier(len(run_ids))

        def log(run_id: str, dataset: DatasetInput = dataset, start: Any = start) -> None:
            start.wait()
            try:
                _log_dataset(client, run_id, dataset)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=log, args=(run_id,)) for run_id in run_ids]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        for run_id in run_ids:
            (linked,) = client.get_run(run_id).inputs.dataset_inputs
            assert linked.dataset.digest == dataset.digest
