"""Two resumes of one interrupted sweep started together (issue 12, item 4): exactly one
takes the parent over, so every configuration keeps exactly one successful child run.

Every test runs on a SQLite store (file lock and compare-and-set) and on MLflow's tracking
server (compare-and-set only):

- the user's case: an interrupted sweep (made as in tests/sweep/test_sweep.py: Ctrl-C during a
  job) resumed by two real ``ragsweep -m sweep=...`` processes started together;
- the same takeover with the start lined up: two processes that have opened the store
  wait for each other, then call ``SweepRuns.open`` at the same instant (before the fix, 6
  of 8 such pairs both resumed the parent);
- the worst interleaving of the claim itself: both read the parent, then both claim it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.config.schema import TrackingConfig
from ragsweep.core import tags as tag
from ragsweep.sweep.runs import CLAIM_PARAM, SweepRuns
from ragsweep.sweep.spec import load_sweep
from tests.reliability.tracking_servers import MlflowServer
from tests.run.test_pipeline import project_overrides
from tests.sweep.test_sweep import MINI_SWEEP, Interrupt, multirun, write_sweep

BIN = Path(sys.executable).parent
LOST = ("is being resumed", "is still RUNNING", "was taken over by another process")

CLAIM_SCRIPT = """
import pathlib, sys, time
from ragsweep.sweep.runs import SweepInProgressError, claim_parent
from ragsweep.tracking.store import open_client
uri, parent, barrier, name = sys.argv[1:5]
client = open_client(uri)
run = client.get_run(parent)  # read before the other process claims
folder = pathlib.Path(barrier)
(folder / name).touch()
while len(list(folder.iterdir())) < 2:
    time.sleep(0.005)
try:
    print("won", claim_parent(client, run))
except SweepInProgressError as exc:
    print("lost", exc)
"""


OPEN_SCRIPT = """
import pathlib, sys, time
from ragsweep.config.schema import TrackingConfig
from ragsweep.sweep.runs import SweepInProgressError, SweepRuns
from ragsweep.sweep.spec import load_sweep
from ragsweep.tracking.log import ensure_experiment
uri, experiment, sweep_file, digest, barrier, name = sys.argv[1:7]
tracking = TrackingConfig(uri=uri, experiment=experiment)
spec = load_sweep(pathlib.Path(sweep_file))
ensure_experiment(tracking)  # the store is open: only the takeover is left
folder = pathlib.Path(barrier)
(folder / name).touch()
while len(list(folder.iterdir())) < 2:
    time.sleep(0.001)
try:
    runs = SweepRuns.open(tracking, spec, digest, resume=True)
    print("resumed" if runs.resumed else "new", runs.parent_id)
except SweepInProgressError as exc:
    print("refused", exc)
"""
ROUNDS = 3


@pytest.fixture(scope="module")
def mlflow_server(
    tmp_path_factory: pytest.TempPathFactory, migrated_mlflow_db: Path
) -> Iterator[MlflowServer]:
    with MlflowServer(tmp_path_factory.mktemp("server"), migrated_mlflow_db) as server:
        yield server


@pytest.fixture(params=["sqlite", "http"])
def store_uri(request: pytest.FixtureRequest, tmp_path: Path, tracking_db: Path) -> str:
    """A migrated SQLite store of this test (tmp_path/outputs/mlflow.db), or MLflow's
    tracking server (shared by the module; each test uses its own experiment)."""
    if request.param == "sqlite":
        return f"sqlite:///{tracking_db}"
    server: MlflowServer = request.getfixturevalue("mlflow_server")
    return server.uri


def children(client: MlflowClient, experiment_id: str, parent_id: str) -> list[Any]:
    return list(
        client.search_runs(
            [experiment_id], filter_string=f"tags.`{tag.PARENT_RUN_ID}` = '{parent_id}'"
        )
    )


@pytest.mark.slow  # an interrupted sweep, then two sweep processes at once
def test_two_resumes_started_together_log_one_child_per_configuration(
    tmp_path: Path, mini_project: Path, store_uri: str
) -> None:
    sweep = write_sweep(tmp_path, MINI_SWEEP)
    experiment = f"race-{tmp_path.name}"
    args = [
        f"sweep={sweep}",
        f"tracking.uri={store_uri}",
        f"tracking.experiment={experiment}",
        *project_overrides(mini_project),
    ]
    with pytest.raises(KeyboardInterrupt):
        multirun(Interrupt(size=200), tmp_path, "first", *args)
    client = MlflowClient(store_uri)
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    (parent,) = client.search_runs([experiment_id], f"tags.`{tag.SWEEP_ROLE}` = 'parent'")
    assert parent.info.status == "KILLED" and parent.data.tags[tag.SWEEP_RELEASED] == "0"
    assert len(children(client, experiment_id, parent.info.run_id)) == 2  # axis 1

    env = {**os.environ, "MLFLOW_TRACKING_URI": ""}
    resumes = [
        subprocess.Popen(
            [
                str(BIN / "ragsweep"),
                "-m",
                *args,
                f"paths.output_dir={tmp_path / 'outputs'}",
                f"hydra.sweep.dir={tmp_path / f'resume{n}'}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=env,
        )
        for n in range(2)
    ]
    streams = [p.communicate(timeout=600) for p in resumes]
    outcomes = [(p.returncode, out, err) for p, (out, err) in zip(resumes, streams, strict=True)]
    winners = [o for o in outcomes if o[0] == 0]
    losers = [o for o in outcomes if o[0] != 0]
    resuming = f"resuming sweep mini (parent run {parent.info.run_id})"
    if len(winners) == 2:
        # The two did not overlap: one resume had finished the sweep before the other
        # looked, and a finished sweep is not resumed, so the other started a new parent.
        # The exclusive claim itself is covered by the claim tests below, which start
        # their claims at one instant.
        texts = [" ".join(out.split()) for _, out, _ in winners]
        assert sum(resuming in text for text in texts) == 1, outcomes
        parents = client.search_runs([experiment_id], f"tags.`{tag.SWEEP_ROLE}` = 'parent'")
        assert len(parents) == 2, outcomes
    else:
        assert len(winners) == 1 and len(losers) == 1, outcomes
        assert losers[0][0] == 2 and any(m in losers[0][2] for m in LOST), losers[0][2][-2000:]
        assert "Traceback" not in losers[0][2]
        assert resuming in " ".join(winners[0][1].split())

    finished = [
        c
        for c in children(client, experiment_id, parent.info.run_id)
        if c.info.status == "FINISHED"
    ]
    hashes = [c.data.tags[tag.CONFIG_HASH] for c in finished]
    assert len(hashes) == 3 and len(set(hashes)) == 3  # none, nfkc, nfkc + size 200
    assert client.get_run(parent.info.run_id).info.status == "FINISHED"
    assert client.get_run(parent.info.run_id).data.params[f"{CLAIM_PARAM}1"]


def interrupted_parent(tmp_path: Path, store_uri: str, name: str) -> tuple[SweepRuns, Path]:
    """A sweep's parent run as an interrupted sweep leaves it (released, KILLED), and the
    sweep file; ``name`` names the experiment, the file and the sweep's digest."""
    tracking = TrackingConfig(uri=store_uri, experiment=f"{name}-{tmp_path.name}")
    sweep = write_sweep(tmp_path, MINI_SWEEP, f"{name}.yaml")
    runs = SweepRuns.open(tracking, load_sweep(sweep), f"{name}-{tmp_path.name}", resume=True)
    runs.client.set_tag(runs.parent_id, tag.SWEEP_RELEASED, "0")
    runs.client.set_terminated(runs.parent_id, status="KILLED")
    return runs, sweep


def together(script: str, *args: str, barrier: Path) -> list[tuple[int, str]]:
    """Run ``script`` in two processes that meet at ``barrier`` (their last two arguments:
    the barrier folder and a name); return each one's pid and stdout."""
    barrier.mkdir()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, *args, str(barrier), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "MLFLOW_TRACKING_URI": ""},
        )
        for name in ("a", "b")
    ]
    done = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-2000:]
        done.append((process.pid, out.strip()))
    return done


@pytest.mark.slow  # ROUNDS pairs of processes per store
def test_two_takeovers_at_the_same_instant_resume_the_parent_once(
    tmp_path: Path, store_uri: str
) -> None:
    for round_ in range(ROUNDS):
        name = f"open{round_}"
        runs, sweep = interrupted_parent(tmp_path, store_uri, name)
        done = together(
            OPEN_SCRIPT,
            store_uri,
            f"{name}-{tmp_path.name}",
            str(sweep),
            f"{name}-{tmp_path.name}",
            barrier=tmp_path / f"barrier{round_}",
        )
        said = sorted(out for _, out in done)
        assert said[0].startswith("refused sweep parent run"), said
        assert any(m in said[0] for m in LOST), said
        assert said[1] == f"resumed {runs.parent_id}", said


@pytest.mark.slow  # two processes importing MLflow, per store
def test_two_processes_claiming_one_parent_at_once_one_wins(tmp_path: Path, store_uri: str) -> None:
    runs, _ = interrupted_parent(tmp_path, store_uri, "claim")
    done = together(CLAIM_SCRIPT, store_uri, runs.parent_id, barrier=tmp_path / "barrier")
    said = sorted(out for _, out in done)
    assert said[0].startswith("lost sweep parent run"), said
    assert "was taken over by another process" in said[0]
    assert said[1] == "won 1", said
    (winner,) = [pid for pid, out in done if out == "won 1"]

    parent = runs.client.get_run(runs.parent_id)
    owner = f"{socket.gethostname()}:{winner}"
    assert parent.data.params[f"{CLAIM_PARAM}1"] == owner
    assert parent.data.tags[tag.SWEEP_OWNER] == owner
    assert parent.info.status == "RUNNING"
