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

from ragsweep.config.schema import TrackingConfig
from ragsweep.core import tags as tag
from ragsweep.core.errors import RagsweepError
from ragsweep.core.hashing import sha256_json
from ragsweep.core.names import FAILED, FINISHED, KILLED, RUNNING
from ragsweep.eval.metric_keys import ACL_LEAKS, N_ANSWERABLE
from ragsweep.run.names import sweep_parent_name
from ragsweep.sweep.notes import child_note, parent_note, was_chosen
from ragsweep.sweep.paired import PairedDifference
from ragsweep.sweep.result import STATUSES, AxisResult, SweepResult
from ragsweep.sweep.spec import SweepSpec
from ragsweep.tracking.background import active as active_sweep_logger
from ragsweep.tracking.log import (
    MAX_PARAM_VALUE,
    RunRecord,
    batches,
    client_for,
    ensure_experiment,
    log_run,
)
from ragsweep.tracking.store import exclusive_lock, lock_file, tracking_uri


class SweepInProgressError(RagsweepError):
    """The sweep to resume is still being run by a live process."""


CLAIM_PARAM = "sweep.claim."
"""Param ``sweep.claim.<n>`` of a parent run: ``host:pid`` of the process that took the parent
over for the n-th time (the creator is generation 0). MLflow never changes a logged param,
so logging it is a compare-and-set: of two processes claiming the same generation, the
store's unique key on (run, param) lets exactly one succeed."""


def owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Ownership:
    """Who holds a parent run: claim ``generation`` (0: its creator), the ``owner``
    (``host:pid``), and whether that owner let go (``released``: its sweep ended)."""

    generation: int
    owner: str
    released: bool

    @classmethod
    def of(cls, run: Any) -> Ownership:
        claims = {
            int(key.removeprefix(CLAIM_PARAM)): value
            for key, value in run.data.params.items()
            if key.startswith(CLAIM_PARAM) and key.removeprefix(CLAIM_PARAM).isdigit()
        }
        generation = max(claims, default=0)
        owner = claims.get(generation) or run.data.tags.get(tag.SWEEP_OWNER, "")
        released = run.data.tags.get(tag.SWEEP_RELEASED) == str(generation) or (
            generation == 0 and run.info.status != RUNNING
        )
        return cls(generation, owner, released)

    def owner_is_gone(self) -> bool:
        """True when the owner ran on this host and its process no longer exists (on
        another host it cannot be known)."""
        host, _, pid = self.owner.rpartition(":")
        return host == socket.gethostname() and pid.isdigit() and not _process_alive(int(pid))


def check_not_running_elsewhere(run: Any) -> Ownership:
    """Refuse to resume a parent whose owner may still be alive; return its ownership.

    A parent whose last owner ended its sweep (FAILED, KILLED) was interrupted; otherwise
    it was either cut off hard (its process is gone) or is being driven or resumed right
    now. On this host the owner's pid tells which; on another host it cannot be known, so
    we refuse and name the way out.
    """
    own = Ownership.of(run)
    if own.released or own.owner_is_gone():
        return own
    state = f"is still {RUNNING}" if run.info.status == RUNNING else "is being resumed"
    raise SweepInProgressError(
        f"sweep parent run {run.info.run_id} {state} (owner {own.owner or 'unknown'}); "
        "wait for that sweep to finish, or start a new parent with "
        "hydra.sweeper.resume=false"
    )


def claim_parent(client: Any, run: Any) -> int:
    """Take over the interrupted parent ``run`` for this process; return the claim
    generation. Exactly one of several processes claiming it at once succeeds (see
    ``CLAIM_PARAM``); the others get a SweepInProgressError."""
    own = check_not_running_elsewhere(run)
    run_id, mine = str(run.info.run_id), owner_id()
    key = f"{CLAIM_PARAM}{own.generation + 1}"
    try:
        client.log_param(run_id, key, mine)
    except Exception:
        holder = client.get_run(run_id).data.params.get(key)
        if holder is None:
            raise  # not a lost claim: the store failed
        if holder != mine:
            raise SweepInProgressError(
                f"sweep parent run {run_id} was taken over by another process ({holder}) "
                "resuming the same sweep at the same time; let that one finish, or start a "
                "new parent with hydra.sweeper.resume=false"
            ) from None
    client.update_run(run_id, status=RUNNING)
    client.set_tag(run_id, tag.SWEEP_OWNER, mine)
    return own.generation + 1


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
    acl_leaks: float | None = None
    """Its logged ``acl_leaks`` (None: not logged, a corpus without access metadata)."""


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
    if runs and runs[0].info.status != FINISHED:
        return runs[0]
    return None


class SweepRuns:
    """The parent run of one sweep and what is logged under it; ``generation``: this
    process's claim on the parent (0: it created it)."""

    def __init__(
        self,
        tracking: TrackingConfig,
        client: Any,
        experiment_id: str,
        parent_id: str,
        resumed: bool,
        generation: int = 0,
    ) -> None:
        self.tracking = tracking
        self.client = client
        self.experiment_id = experiment_id
        self.parent_id = parent_id
        self.resumed = resumed
        self.generation = generation
        self.names: dict[str, str] = {}
        """Run id → name of the children read so far (the best one's is linked at the end)."""
        self.inputs: dict[str, str] = {}
        """Tags every job gets: the data digests taken when the sweep started
        (:mod:`ragsweep.run.inputs`)."""

    @classmethod
    def open(
        cls, tracking: TrackingConfig, spec: SweepSpec, digest: str, resume: bool
    ) -> SweepRuns:
        """Resume the unfinished parent run of the same sweep, or start a new one.

        On a local store (SQLite, file) the lookup and the claim or creation run under the
        store's sweeps lock (``mlflow.db.sweeps.lock``), so processes starting the same
        sweep together see each other's parent; on any store the claim itself is a
        compare-and-set (:func:`claim_parent`).
        """
        experiment_id = ensure_experiment(tracking)
        client = client_for(tracking)
        with exclusive_lock(lock_file(tracking_uri(tracking), "sweeps")):
            previous = find_unfinished_parent(client, experiment_id, digest) if resume else None
            if previous is not None:
                generation = claim_parent(client, previous)
                runs = cls(tracking, client, experiment_id, previous.info.run_id, True, generation)
                runs.kill_stale_children()
                return runs
            parent_id = _new_parent(client, experiment_id, spec, digest)
            return cls(tracking, client, experiment_id, parent_id, resumed=False)

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
        for run in self._children(RUNNING):
            self.client.set_terminated(run.info.run_id, status=KILLED)

    def logged_children(self, objective: str) -> dict[str, LoggedChild]:
        """Successfully logged children by config hash (``ragsweep.config_hash`` tag)."""
        found: dict[str, LoggedChild] = {}
        for run in self._children(FINISHED):
            tags, metrics = run.data.tags, run.data.metrics
            config_hash = tags.get(tag.CONFIG_HASH)
            if not config_hash or objective not in metrics:
                continue
            n = metrics.get(N_ANSWERABLE)
            self.names[str(run.info.run_id)] = str(run.info.run_name or "")
            found.setdefault(
                config_hash,
                LoggedChild(
                    run_id=run.info.run_id,
                    objective=float(metrics[objective]),
                    n=None if n is None else int(n),
                    acl_leaks=metrics.get(ACL_LEAKS),
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
                status=FAILED,
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
            f" and tags.`{tag.CONFIG_HASH}` = '{config_hash}'"
            f" and attributes.start_time >= {launched_ms}"
        )
        for status in (FAILED, RUNNING):
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
                RunTag(tag.RUN_NAME, run_name),
            ],
        )
        self.client.log_artifact(run_id, str(artifacts_dir / "error.txt"))
        self.client.set_terminated(run_id, status=FAILED)

    def tag_parent(self, key: str, value: str) -> None:
        self.client.set_tag(self.parent_id, key, value[:MAX_TAG_VALUE])

    def mark_best(self, run_id: str) -> None:
        """Tag the best child (the parent's link to it is logged by :meth:`finish`)."""
        self.client.set_tag(run_id, tag.BEST, "true")

    def describe_axis(
        self, spec: SweepSpec, axes: Sequence[AxisResult], config_lines: Mapping[str, str]
    ) -> None:
        """Once the last of ``axes`` is decided: rewrite the description of each of its
        runs (:func:`ragsweep.sweep.notes.child_note`, every decided axis it took part in)
        and tag whether its value was chosen; through the sweep's logger when there is one
        (:mod:`ragsweep.tracking.background`). ``config_lines``: run id → its config summary
        line."""
        from mlflow.entities import RunTag

        for run_id in dict.fromkeys(t.run_id for t in axes[-1].trials if t.run_id):
            note = child_note(
                spec,
                axes,
                run_id,
                self.experiment_id,
                self.parent_id,
                config_lines.get(run_id, ""),
            )
            chosen = "true" if was_chosen(axes, run_id) else "false"
            tags = {tag.NOTE: note[:MAX_TAG_VALUE], tag.CHOSEN: chosen}
            logger = active_sweep_logger()
            if logger is not None:  # set while the next axis computes
                logger.set_tags(run_id, tags)
                continue
            self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])

    def finish(self, result: SweepResult, files: Sequence[Path], status: str) -> None:
        """Log the end-of-sweep files on the parent, describe it and close it with
        ``status``. A finished sweep also gets its trail (``trail/<objective>``: the best
        objective after each axis, step = axis number), the best value
        (``best/<objective>``) and counts; the parent never logs the objective under the
        children's key, so it does not sort among them by it."""
        from mlflow.entities import RunTag

        metrics = _end_metrics(result) if status == FINISHED else []
        tags: list[RunTag] = []
        best_name = None
        best = result.final.run_id if result.final is not None else None
        if best:
            self.mark_best(best)
            best_name = self.names.get(best) or self.client.get_run(best).info.run_name
            tags.append(RunTag(tag.BEST_RUN_ID, best))
        for path in files:
            self.client.log_artifact(self.parent_id, str(path))
        note = parent_note(result, self.experiment_id, best_name)
        tags.append(RunTag(tag.NOTE, note[:MAX_TAG_VALUE]))
        tags.append(RunTag(tag.SWEEP_RELEASED, str(self.generation)))  # last: lets go
        self.client.log_batch(self.parent_id, metrics=metrics, tags=tags)
        self.client.set_terminated(self.parent_id, status=status)


def _end_metrics(result: SweepResult) -> list[Any]:
    """A finished sweep's parent metrics: the trail, the best value and the counts."""
    from mlflow.entities import Metric

    timestamp = _now_ms()
    objective = result.spec.objective
    metrics = [
        Metric(trail_key(objective), float(step["objective"]), timestamp, number)
        for number, step in enumerate(result.trail, start=1)
    ]
    if result.final is not None:
        metrics.append(Metric(best_key(objective), result.final.objective, timestamp, 0))
    metrics += [Metric(key, value, timestamp, 0) for key, value in decision_metrics(result).items()]
    return metrics + [Metric(f"sweep_{s}", float(result.count(s)), timestamp, 0) for s in STATUSES]


def decision_metrics(result: SweepResult) -> dict[str, float]:
    """Per decided axis N, the runner-up against the chosen value:
    ``decision/N/p_value``, ``decision/N/p_adjusted``, ``decision/N/gained`` and
    ``decision/N/lost`` (the search's decision is the last N); ``sweep_configurations``,
    the configurations evaluated; after a search, ``search_trials`` and ``search_adopted``
    (1: its best replaced the one-axis winner)."""
    values: dict[str, float] = {"sweep_configurations": float(result.configurations)}
    if result.search is not None and result.search.adopted is not None:
        values["search_trials"] = float(len(result.search.trials))
        values["search_adopted"] = float(result.search.adopted)
    for number, axis_result in enumerate(result.axes, start=1):
        if axis_result.runner_up is None:
            continue
        paired = axis_result.trials[axis_result.runner_up].paired
        if not isinstance(paired, PairedDifference):
            continue
        values[f"decision/{number}/p_value"] = paired.p_value
        if paired.p_adjusted is not None:
            values[f"decision/{number}/p_adjusted"] = paired.p_adjusted
        values[f"decision/{number}/gained"] = float(paired.test.gained)
        values[f"decision/{number}/lost"] = float(paired.test.lost)
    return values


def trail_key(objective: str) -> str:
    """The parent's metric of the best objective after each axis (step = axis number)."""
    return f"trail/{objective}"


def best_key(objective: str) -> str:
    """The parent's metric of the sweep's final (best) objective."""
    return f"best/{objective}"


def _new_parent(client: Any, experiment_id: str, spec: SweepSpec, digest: str) -> str:
    from mlflow.entities import Param

    run = client.create_run(experiment_id, tags=_parent_tags(spec, digest))
    run_id = str(run.info.run_id)
    client.update_run(run_id, name=sweep_parent_name(spec.name, run_id))
    params = [Param(k, v[:MAX_PARAM_VALUE]) for k, v in sorted(spec.params().items())]
    client.log_batch(run_id, params=params)
    client.log_artifact(run_id, str(spec.path))
    return run_id


def _parent_tags(spec: SweepSpec, digest: str) -> dict[str, str]:
    tags = {
        tag.SWEEP: spec.name,
        tag.SWEEP_ROLE: tag.PARENT_ROLE,
        tag.SWEEP_AXES: " → ".join(a.label for a in spec.axes),
        tag.OBJECTIVE: spec.objective,
        tag.DIRECTION: spec.direction,
        tag.SWEEP_FILE: str(spec.path),
        tag.SWEEP_DIGEST: digest,
        tag.SWEEP_OWNER: owner_id(),
    }
    if spec.description:
        tags[tag.NOTE] = spec.description  # until the sweep ends and describes its result
    return tags


def _now_ms() -> int:
    return int(time.time() * 1000)
