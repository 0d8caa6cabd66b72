"""``tracking.parent_run_id`` given by hand: it must name a sweep parent runs can join.

A sweep gives each of its jobs its own parent's id; a user who sets
``tracking.parent_run_id`` on a single run or a grid means to add runs to a sweep. An id
that names no run would leave a dangling parent; a finished sweep's parent would silently
gain a child its decision never saw. So the id must name a run of the configured
experiment that is a sweep's parent (tag ``ragsweep.sweep_role=parent``) and is still
RUNNING or resumable (FAILED or KILLED). Checked before any work (a Hydra callback);
a store that does not exist yet is not created for it.
"""

from __future__ import annotations

from typing import Any

from ragsweep.config.schema import TrackingConfig
from ragsweep.core import tags as tag
from ragsweep.core.errors import ConfigError
from ragsweep.core.names import FAILED, KILLED, RUNNING
from ragsweep.tracking.store import open_client, sqlite_path, tracking_uri

JOINABLE = frozenset({RUNNING, FAILED, KILLED})
"""Statuses of a sweep parent that runs may be added to (running, or resumable)."""
KEY = "tracking.parent_run_id"


class ParentRunError(ConfigError):
    """``tracking.parent_run_id`` names no sweep parent runs can be added to."""


def check_parent_run(cfg: TrackingConfig) -> None:
    """Refuse ``cfg.parent_run_id`` unless it names a running or resumable sweep parent
    of ``cfg.experiment`` (module docstring). Nothing to check when it is unset or
    tracking is off; an empty id is refused."""
    parent = cfg.parent_run_id
    if parent is None or not cfg.enabled:
        return
    if not str(parent).strip():
        raise ParentRunError(f"{KEY} is empty; leave it out (null) for a run without a parent")
    uri = tracking_uri(cfg)
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        raise ParentRunError(f"{KEY}={parent}: no MLflow store at {uri} yet, so no such run")
    _check_run(open_client(uri, cfg), cfg, str(parent), uri)


def _check_run(client: Any, cfg: TrackingConfig, parent: str, uri: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        run = client.get_run(parent)
    except MlflowException:
        raise ParentRunError(f"{KEY}={parent}: no such run in {uri}") from None
    experiment = client.get_experiment_by_name(cfg.experiment)
    if experiment is None or str(experiment.experiment_id) != str(run.info.experiment_id):
        raise ParentRunError(
            f"{KEY}={parent}: that run is not in experiment {cfg.experiment!r} (set "
            "tracking.experiment to the sweep's experiment)"
        )
    if run.data.tags.get(tag.SWEEP_ROLE) != tag.PARENT_ROLE:
        raise ParentRunError(f"{KEY}={parent}: that run is not a sweep's parent run")
    if run.info.status not in JOINABLE:
        raise ParentRunError(
            f"{KEY}={parent}: that sweep is {run.info.status}; a finished sweep takes no "
            "more runs (start a new sweep, or run without tracking.parent_run_id)"
        )
