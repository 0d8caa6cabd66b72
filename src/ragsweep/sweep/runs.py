"""The MLflow side of a sweep: the parent run, failed child runs, the best tag and resume.

Runs are written with ``MlflowClient`` from the sweeper's (parent) process; successful child
runs are logged by the jobs themselves (any process, any launcher) and attach to the parent
through the ``tracking.parent_run_id`` override the sweeper gives every job.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsweep import tags as tag
from ragsweep.config import TrackingConfig
from ragsweep.errors import RagsweepError
from ragsweep.hashing import sha256_json
from ragsweep.sweep.result import STATUSES, SweepResult
from ragsweep.sweep.spec import SweepSpec
from ragsweep.tracking import (
    MAX_PARAM_VALUE,
    RunRecord,
    batches,
    client_for,
    ensure_experiment,
    log_run,
)


class SweepInProgressError(RagsweepError):
    """The sweep to resume is still being run by a live process."""


def owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def check_not_running_elsewhere(run: Any) -> None:
    """Refuse to resume a RUNNING parent whose owner may still be alive.

    A parent that is FAILED or KILLED was interrupted; a RUNNING one was either cut off
    hard (its process is gone) or is being driven right now. On this host the owner's pid
    tells which; on another host it cannot be known, so we refuse and name the way out.
    """
    if run.info.status != "RUNNING":
        return
    owner = run.data.tags.get(tag.SWEEP_OWNER, "")
    host, _, pid = owner.rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and not _process_alive(int(pid)):
        return
    raise SweepInProgressError(
        f"sweep parent run {run.info.run_id} is still RUNNING (owner {owner or 'unknown'}); "
        "wait for that sweep to finish, or start a new parent with "
        "hydra.sweeper.resume=false"
    )


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


MAX_TAG_VALUE = 5000
PAGE = 1000


def sweep_digest(spec: SweepSpec, baseline_hash: str, corpus_hash: str, golden_digest: str) -> str:
    """Identity of a sweep for resume: its plan, its starting config and its data."""
    return sha256_json(
        {
            "plan": spec.plan(),
            "baseline_config": baseline_hash,
            "corpus": corpus_hash,
            "golden": golden_digest,
        }
    )


def child_tags(spec: SweepSpec, axis_number: int, axis: str, value: str) -> dict[str, str]:
    """Tags of every child run: which sweep, which axis (1-based position) and which value."""
    return {
        tag.SWEEP: spec.name,
        tag.AXIS: axis,
        tag.AXIS_INDEX: str(axis_number),
        tag.AXIS_VALUE: value,
    }


@dataclass(frozen=True)
class LoggedChild:
    """A child run logged successfully under the parent (``n``: questions scored)."""

    run_id: str
    objective: float
    n: int | None


def _search(client: Any, experiment_id: str, filter_string: str) -> list[Any]:
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], filter_string=filter_string, max_results=PAGE, page_token=token
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def find_unfinished_parent(client: Any, experiment_id: str, digest: str) -> Any | None:
    """The latest parent run of the sweep with ``digest``, if it did not finish."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{tag.SWEEP_DIGEST}` = '{digest}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if runs and runs[0].info.status != "FINISHED":
        return runs[0]
    return None


class SweepRuns:
    """The parent run of one sweep and what is logged under it."""

    def __init__(
        self,
        tracking: TrackingConfig,
        client: Any,
        experiment_id: str,
        parent_id: str,
        resumed: bool,
    ) -> None:
        self.tracking = tracking
        self.client = client
        self.experiment_id = experiment_id
        self.parent_id = parent_id
        self.resumed = resumed

    @classmethod
    def open(
        cls, tracking: TrackingConfig, spec: SweepSpec, digest: str, resume: bool
    ) -> SweepRuns:
        """Resume the unfinished parent run of the same sweep, or start a new one."""
        from mlflow.entities import Param

        experiment_id = ensure_experiment(tracking)
        client = client_for(tracking)
        previous = find_unfinished_parent(client, experiment_id, digest) if resume else None
        if previous is not None:
            check_not_running_elsewhere(previous)
            client.update_run(previous.info.run_id, status="RUNNING")
            client.set_tag(previous.info.run_id, tag.SWEEP_OWNER, owner_id())
            runs = cls(tracking, client, experiment_id, previous.info.run_id, resumed=True)
            runs.kill_stale_children()
            return runs
        run = client.create_run(
            experiment_id, tags=_parent_tags(spec, digest), run_name=f"sweep-{spec.name}"
        )
        params = [Param(k, v[:MAX_PARAM_VALUE]) for k, v in sorted(spec.params().items())]
        client.log_batch(run.info.run_id, params=params)
        client.log_artifact(run.info.run_id, str(spec.path))
        return cls(tracking, client, experiment_id, run.info.run_id, resumed=False)

    def _children(self, status: str, extra_filter: str = "") -> list[Any]:
        """Child runs of the parent with ``status``; ``extra_filter`` adds MLflow filter
        clauses (``and ...``)."""
        return _search(
            self.client,
            self.experiment_id,
            f"tags.`{tag.PARENT_RUN_ID}` = '{self.parent_id}' and attributes.status = '{status}'"
            + extra_filter,
        )

    def kill_stale_children(self) -> None:
        """Children still RUNNING under a parent being resumed were cut off mid-logging."""
        for run in self._children("RUNNING"):
            self.client.set_terminated(run.info.run_id, status="KILLED")

    def logged_children(self, objective: str) -> dict[str, LoggedChild]:
        """Successfully logged children by config hash (``ragsweep.config_hash`` tag)."""
        found: dict[str, LoggedChild] = {}
        for run in self._children("FINISHED"):
            tags, metrics = run.data.tags, run.data.metrics
            config_hash = tags.get(tag.CONFIG_HASH)
            if not config_hash or objective not in metrics:
                continue
            n = metrics.get("n_answerable")
            found.setdefault(
                config_hash,
                LoggedChild(
                    run_id=run.info.run_id,
                    objective=float(metrics[objective]),
                    n=None if n is None else int(n),
                ),
            )
        return found

    def record_failure(
        self,
        run_name: str,
        params: dict[str, str],
        tags: Mapping[str, str],
        error: str,
        artifacts_dir: Path,
        launched_ms: int,
    ) -> str:
        """Log a FAILED child run for a job that raised: its params, tags, and the error
        as the ``ragsweep.error`` tag and ``error.txt`` artifact.

        A job that failed while logging its own run (after MLflow created it, at or after
        ``launched_ms``) left that run FAILED, or RUNNING if even closing it failed: that
        run is completed and closed instead, so the failed attempt leaves one run.
        """
        artifacts_dir.mkdir(parents=True, exist_ok=True)
        (artifacts_dir / "error.txt").write_text(error + "\n", encoding="utf-8")
        own = self._own_failed_run(tags.get(tag.CONFIG_HASH, ""), launched_ms)
        if own is None:
            record = RunRecord(
                run_name=run_name,
                params=params,
                metrics={},
                tags={**tags, tag.ERROR: error[:MAX_TAG_VALUE], tag.PARENT_RUN_ID: self.parent_id},
                artifacts_dir=artifacts_dir,
                status="FAILED",
            )
            return log_run(self.tracking, record)
        self._complete_failed_run(own, run_name, params, error, artifacts_dir)
        return str(own.info.run_id)

    def _own_failed_run(self, config_hash: str, launched_ms: int) -> Any | None:
        """The run a job created for ``config_hash`` in this launch and could not finish:
        FAILED or RUNNING, started at or after ``launched_ms``, without an error tag."""
        if not config_hash:
            return None
        this_launch = (
            f" and tags.`ragsweep.config_hash` = '{config_hash}'"
            f" and attributes.start_time >= {launched_ms}"
        )
        for status in ("FAILED", "RUNNING"):
            for run in self._children(status, this_launch):
                if tag.ERROR not in run.data.tags:
                    return run
        return None

    def _complete_failed_run(
        self, run: Any, run_name: str, params: dict[str, str], error: str, artifacts_dir: Path
    ) -> None:
        from mlflow.entities import Param, RunTag

        run_id = str(run.info.run_id)
        missing = [Param(k, v) for k, v in sorted(params.items()) if k not in run.data.params]
        for batch in batches(missing):
            self.client.log_batch(run_id, params=batch)
        self.client.log_batch(
            run_id,
            tags=[
                RunTag(tag.ERROR, error[:MAX_TAG_VALUE]),
                RunTag("mlflow.runName", run_name),
            ],
        )
        self.client.log_artifact(run_id, str(artifacts_dir / "error.txt"))
        self.client.set_terminated(run_id, status="FAILED")

    def tag_parent(self, key: str, value: str) -> None:
        self.client.set_tag(self.parent_id, key, value[:MAX_TAG_VALUE])

    def mark_best(self, run_id: str) -> None:
        self.client.set_tag(run_id, tag.BEST, "true")
        self.client.set_tag(self.parent_id, tag.BEST_RUN_ID, run_id)

    def finish(self, result: SweepResult, files: Sequence[Path], status: str) -> None:
        """Log the end-of-sweep files on the parent and close it with ``status``. A finished
        sweep also gets its trail (the objective after each axis, as steps) and counts."""
        from mlflow.entities import Metric

        if status == "FINISHED":
            timestamp = _now_ms()
            metrics = [
                Metric(result.spec.objective, float(step["objective"]), timestamp, number)
                for number, step in enumerate(result.trail, start=1)
            ]
            metrics += [
                Metric(f"sweep_{s}", float(result.count(s)), timestamp, 0) for s in STATUSES
            ]
            self.client.log_batch(self.parent_id, metrics=metrics)
        for path in files:
            self.client.log_artifact(self.parent_id, str(path))
        if result.final is not None and result.final.run_id:
            self.mark_best(result.final.run_id)
        self.client.set_terminated(self.parent_id, status=status)


def _parent_tags(spec: SweepSpec, digest: str) -> dict[str, str]:
    tags = {
        tag.SWEEP: spec.name,
        tag.SWEEP_ROLE: "parent",
        tag.SWEEP_AXES: " → ".join(a.label for a in spec.axes),
        tag.OBJECTIVE: spec.objective,
        tag.DIRECTION: spec.direction,
        tag.SWEEP_FILE: str(spec.path),
        tag.SWEEP_DIGEST: digest,
        tag.SWEEP_OWNER: owner_id(),
    }
    if spec.description:
        tags["mlflow.note.content"] = spec.description  # shown as the run's description
    return tags


def _now_ms() -> int:
    return int(time.time() * 1000)
