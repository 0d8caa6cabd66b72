"""What the launcher tests share: a sweep with one job that fails on its worker, the checks
of the MLflow store and the sweep result after it, and a local Ray head node.

The failing job is real: ``embedding=custom`` with :class:`RefusesFewChunks`, a retriever
that refuses to index fewer than ``min_chunks`` chunks. Its configuration is valid (the
sweeper composes and validates every value before launching), so it fails only on the
worker, while building its index: chunking.size=200 cuts the test corpus into 2 chunks,
the other sizes into 3.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from mlflow.tracking import MlflowClient

from tests.custom_retriever import TfidfRetriever
from tests.ports import free_port

REPO = Path(__file__).resolve().parents[1]

SWEEP = """\
axes:
  - chunking.size: [100, 120, 160, 200]
objective: recall_at_5
"""
SIZES = {"100", "120", "160", "200"}
FAILING_SIZE = "200"
RETRIEVER = [
    "embedding=custom",
    "embedding.options._target_=tests.cluster_support.RefusesFewChunks",
    "+embedding.options.min_chunks=3",
]


class RefusesFewChunks(TfidfRetriever):
    """TF-IDF retrieval that raises when asked to index fewer than ``min_chunks`` chunks."""

    def __init__(self, min_chunks: int, sublinear: bool = True, version: str = "1") -> None:
        super().__init__(sublinear=sublinear, version=version)
        self.min_chunks = min_chunks

    def build(self, texts: Sequence[str]) -> None:
        if len(texts) < self.min_chunks:
            raise RuntimeError(f"refusing to index {len(texts)} chunks (< {self.min_chunks})")
        super().build(texts)


def worker_env() -> dict[str, str]:
    """The environment of the driver and of every worker: this repository importable (the
    retriever above lives in ``tests``), MLflow's URI left to the config."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "MLFLOW_TRACKING_URI": ""}


def check_sweep(out: subprocess.CompletedProcess[str], tmp_path: Path) -> None:
    """The sweep of :data:`SWEEP` went through on the workers: every child run logged once
    (the failing one as FAILED, with its error), the parent saw every objective; because a
    job failed, the sweep exits 2 with its parent FAILED and chooses nothing (the same
    command runs the failed job again: docs/sweeps.md, "Failed jobs and changed inputs")."""
    assert out.returncode == 2, out.stderr[-3000:]
    assert "database is locked" not in out.stderr
    assert "axis 1/1 chunking.size: launching 4 of 4 configuration(s)" in out.stdout
    assert f"failed chunking.size={FAILING_SIZE}: " in out.stdout
    assert "1 job(s) of the sweep failed" in out.stderr

    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    runs = client.search_runs(client.get_experiment_by_name("ragsweep").experiment_id)
    (parent,) = [r for r in runs if r.data.tags.get("ragsweep.sweep_role") == "parent"]
    assert parent.info.status == "FAILED"
    children = [r for r in runs if r is not parent]
    assert len(children) == 4
    assert {c.data.params["chunking.size"] for c in children} == SIZES
    assert len({c.data.tags["ragsweep.config_hash"] for c in children}) == 4
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    (failed,) = [c for c in children if c.info.status == "FAILED"]
    assert failed.data.params["chunking.size"] == FAILING_SIZE
    assert "refusing to index 2 chunks (< 3)" in failed.data.tags["ragsweep.error"]
    finished = [c for c in children if c is not failed]
    assert all(c.info.status == "FINISHED" for c in finished)

    result = yaml.safe_load((tmp_path / "sweep" / "sweep_result.yaml").read_text())
    assert result["complete"] is False and result["final"] is None
    (axis,) = result["axes"]
    statuses = {t["value"]: t["status"] for t in axis["trials"]}
    assert statuses == {"100": "new", "120": "new", "160": "new", FAILING_SIZE: "failed"}
    objectives = {c.info.run_id: c.data.metrics["recall_at_5"] for c in finished}
    by_run = {t["run_id"]: t["objective"] for t in axis["trials"] if t["status"] == "new"}
    assert by_run == objectives  # the parent saw the objective of every job that ran
    # per-case values written by the workers pair every value with the chosen one
    others = [t for t in axis["trials"] if t["status"] == "new" and t["value"] != axis["chosen"]]
    assert len(others) == 2
    assert all(0 < t["vs_chosen"]["p_value"] <= 1 and t["vs_chosen"]["n"] == 3 for t in others)


@dataclass(frozen=True)
class RayHead:
    """A running local Ray head node; ``address`` is what ``ray.init`` connects to."""

    address: str
    process: subprocess.Popen[bytes]


RAY_START_SECONDS = 180


@contextmanager
def ray_head(ray: Path, temp_dir: Path, num_cpus: int = 2) -> Iterator[RayHead]:
    """``ray start --head --block`` on 127.0.0.1 in a process group of its own; on exit the
    group (the head and every Ray process it started, workers included) is terminated."""
    port = free_port()
    log = temp_dir / "ray-start.log"
    command = [
        str(ray),
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        f"--num-cpus={num_cpus}",
        "--disable-usage-stats",
        "--include-dashboard=false",
        f"--temp-dir={temp_dir / 'ray'}",
    ]
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=worker_env(), start_new_session=True
        )
    try:
        _wait_for_head(process, log, port)
        yield RayHead(f"127.0.0.1:{port}", process)
    finally:
        _stop_group(process)


def _wait_for_head(process: subprocess.Popen[bytes], log: Path, port: int) -> None:
    deadline = time.monotonic() + RAY_START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ray start exited {process.returncode}: {log.read_text()[-3000:]}")
        if "Ray runtime started" in log.read_text(errors="replace"):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return
        time.sleep(0.5)
    raise RuntimeError(f"ray start did not come up in {RAY_START_SECONDS} s: {log.read_text()}")


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the head's process group (``--block`` then stops every Ray process it
    started), SIGKILL to whatever is left after 60 s."""
    group = process.pid  # start_new_session: the group id is the head's pid
    try:
        os.killpg(group, signal.SIGTERM)
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        return
