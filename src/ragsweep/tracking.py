"""MLflow logging: one run per evaluated configuration.

The default store is an SQLite database under ``outputs/`` with artifacts beside it; any
MLflow URI can be given with ``tracking.uri`` or ``MLFLOW_TRACKING_URI``. Runs are written
with ``MlflowClient`` (no global active run), in one go at the end of a run. A run that
fails while it is being logged is marked FAILED and lacks the ``ragsweep.logged=complete``
tag, which readers (promotion, comparison, resume) require. See docs/tracking.md.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsweep import tags as tag
from ragsweep.config import TrackingConfig
from ragsweep.errors import ConfigError

MAX_PARAM_VALUE = 6000  # MLflow's limit on a param value's length
BATCH = 100
DATASET_ATTEMPTS = 4  # log_inputs races between parallel jobs; see _log_dataset


@dataclass(frozen=True)
class DatasetInput:
    """The golden set, logged as an MLflow dataset input with its digest."""

    path: str
    name: str
    digest: str
    context: str


@dataclass(frozen=True)
class RunRecord:
    """Everything one MLflow run receives."""

    run_name: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    artifacts_dir: Path
    dataset: DatasetInput | None = None
    status: str = "FINISHED"


def tracking_uri(cfg: TrackingConfig) -> str:
    """``tracking.uri``, else ``MLFLOW_TRACKING_URI``, else the local SQLite store."""
    if cfg.uri:
        return cfg.uri
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    if not cfg.default_db:
        raise ConfigError("tracking.default_db is empty and no tracking.uri is set")
    return "sqlite:///" + str(Path(cfg.default_db).resolve())


def artifact_location(cfg: TrackingConfig) -> str | None:
    if cfg.artifact_location:
        return cfg.artifact_location
    if cfg.default_artifacts:
        return Path(cfg.default_artifacts).resolve().as_uri()
    return None


def client_for(cfg: TrackingConfig) -> Any:
    """An MlflowClient on the configured store (the SQLite file's folder is created)."""
    from mlflow.tracking import MlflowClient

    uri = tracking_uri(cfg)
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=uri)


def ensure_experiment(cfg: TrackingConfig) -> str:
    """Create the store (schema migrations included) and the experiment; return its id.

    Call this once in the parent process before parallel jobs start: concurrent creation of
    a brand-new SQLite store fails inside MLflow's migrations.
    """
    client = client_for(cfg)
    experiment = client.get_experiment_by_name(cfg.experiment)
    if experiment is not None:
        return str(experiment.experiment_id)
    try:
        return str(client.create_experiment(cfg.experiment, artifact_location(cfg)))
    except Exception:  # another process created it between our check and create
        experiment = client.get_experiment_by_name(cfg.experiment)
        if experiment is None:
            raise
        return str(experiment.experiment_id)


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config → ``{"chunking.size": "800", ...}`` with values as strings."""
    flat: dict[str, str] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            text = (
                "null" if value is None else str(list(value) if isinstance(value, tuple) else value)
            )
            flat[name] = text[:MAX_PARAM_VALUE]
    return flat


def batches(items: list[Any]) -> Iterator[list[Any]]:
    """``items`` in slices of at most ``BATCH`` (MLflow's limit per ``log_batch`` call)."""
    for begin in range(0, len(items), BATCH):
        yield items[begin : begin + BATCH]


def log_run(cfg: TrackingConfig, record: RunRecord) -> str:
    """Create one MLflow run from ``record`` and return its run id."""
    from mlflow.entities import Metric, Param, RunTag

    client = client_for(cfg)
    experiment_id = ensure_experiment(cfg)
    run = client.create_run(experiment_id, tags=record.tags, run_name=record.run_name)
    run_id = str(run.info.run_id)
    try:
        params = [Param(k, v) for k, v in sorted(record.params.items())]
        for batch in batches(params):
            client.log_batch(run_id, params=batch)
        timestamp = int(run.info.start_time)
        metrics = [Metric(k, float(v), timestamp, 0) for k, v in sorted(record.metrics.items())]
        for batch in batches(metrics):
            client.log_batch(run_id, metrics=batch)
        if record.dataset is not None:
            _log_dataset(client, run_id, record.dataset)
        client.log_artifacts(run_id, str(record.artifacts_dir))
        client.log_batch(run_id, tags=[RunTag(tag.LOGGED, "complete")])
    except Exception:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status=record.status)
    return run_id


def _log_dataset(client: Any, run_id: str, dataset: DatasetInput) -> None:
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput as MlflowDatasetInput
    from mlflow.entities import InputTag

    with warnings.catch_warnings():  # "can be interpreted in multiple ways": both are local
        warnings.simplefilter("ignore", UserWarning)
        source = resolve_dataset_source(Path(dataset.path).resolve().as_uri())
    meta = MetaDataset(source=source, name=dataset.name, digest=dataset.digest[:32])  # type: ignore[abstract]
    entity = MlflowDatasetInput(
        dataset=meta._to_mlflow_entity(),
        tags=[InputTag(key="mlflow.data.context", value=dataset.context)],
    )
    for attempt in range(DATASET_ATTEMPTS):
        try:
            client.log_inputs(run_id, datasets=[entity])
            return
        except Exception as exc:
            # Parallel jobs of a sweep log the same golden set: MLflow looks the dataset
            # up, then inserts it, so two jobs can both insert and one hits the unique
            # constraint. The dataset exists by then; the next attempt links to it.
            if "UNIQUE constraint failed" not in str(exc) or attempt == DATASET_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
