"""MLflow logging: one run per evaluated configuration.

The default store is an SQLite database under ``outputs/`` with artifacts beside it; any
MLflow URI can be given with ``tracking.uri`` or ``MLFLOW_TRACKING_URI``. Runs are written
with ``MlflowClient`` (no global active run), in one go at the end of a run. A run that
fails while it is being logged is marked FAILED and lacks the ``ragsweep.logged=complete``
tag, which readers (promotion, comparison, resume) require. Before the store is written,
the run's directory receives ``record.json`` (everything the run sends to MLflow), so a run
whose store fails at the end is not lost: ``ragsweep-log RUN_DIR`` logs it later. The store
itself (creation, locks, repair, timeouts) is :mod:`ragsweep.tracking.store`; logging in
another process, :mod:`ragsweep.tracking.background`. See docs/tracking.md.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsweep.config.schema import TrackingConfig, from_mapping
from ragsweep.core import tags as tag
from ragsweep.core.errors import RagsweepError
from ragsweep.core.names import FAILED, FINISHED, RECORD_FILE, RUNNING
from ragsweep.tracking.artifacts import LOCAL_ONLY_FILES, stored_copy
from ragsweep.tracking.store import (
    TrackingStoreError,
    is_local,
    open_client,
    prepare_store,
    reason,
    tracking_uri,
)

MAX_PARAM_VALUE = 6000  # MLflow's limit on a param value's length
BATCH = 100
"""MLflow's limit on params (and on tags) per ``log_batch`` call."""
MAX_BATCH_ENTITIES = 1000
"""MLflow's limit on params, metrics and tags together per ``log_batch`` call."""
DATASET_ATTEMPTS = 4  # log_inputs races between parallel jobs; see _log_dataset
DUPLICATE_KEY_MESSAGES = (
    "UNIQUE constraint failed",  # SQLite
    "duplicate key value violates unique constraint",  # PostgreSQL
    "Duplicate entry",  # MySQL
)
"""How each database reports a unique-key violation (MLflow passes its message on, also
through a tracking server)."""
RECORD_FORMAT = 1
LOG_FILE = "ragsweep-log.txt"
"""In a run directory: what its background ``ragsweep-log`` printed (not uploaded)."""


class RecordError(RagsweepError):
    """A run directory without a readable ``record.json`` (names the file)."""


@dataclass(frozen=True)
class DatasetInput:
    """The golden set, logged as an MLflow dataset input with its digest."""

    path: str
    name: str
    digest: str
    context: str


@dataclass(frozen=True)
class RunRecord:
    """Everything one MLflow run receives. ``record_id`` identifies the record (and is
    tagged on the run), so logging it again later never makes a second run."""

    run_name: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    artifacts_dir: Path
    dataset: DatasetInput | None = None
    status: str = FINISHED
    record_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def to_json(self, tracking: TrackingConfig) -> dict[str, Any]:
        """The ``record.json`` content; ``tracking``: the store settings it was logged with."""
        dataset = None
        if self.dataset is not None:
            dataset = {
                **dataclasses.asdict(self.dataset),
                "path": str(Path(self.dataset.path).resolve()),
            }
        return {
            "format": RECORD_FORMAT,
            "record_id": self.record_id,
            "run_name": self.run_name,
            "status": self.status,
            "params": self.params,
            "metrics": self.metrics,
            "tags": self.tags,
            "dataset": dataset,
            "tracking": dataclasses.asdict(tracking),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], artifacts_dir: Path) -> RunRecord:
        """Inverse of :meth:`to_json` (without the tracking settings)."""
        dataset = data.get("dataset")
        return cls(
            run_name=str(data["run_name"]),
            params={str(k): str(v) for k, v in data["params"].items()},
            metrics={str(k): float(v) for k, v in data["metrics"].items()},
            tags={str(k): str(v) for k, v in data["tags"].items()},
            artifacts_dir=artifacts_dir,
            dataset=DatasetInput(**dataset) if dataset else None,
            status=str(data["status"]),
            record_id=str(data["record_id"]),
        )


def save_record(cfg: TrackingConfig, record: RunRecord) -> Path:
    """Write ``record.json`` into the run directory (atomically: no half-written file)."""
    path = record.artifacts_dir / RECORD_FILE
    temporary = path.with_name(f".{RECORD_FILE}.tmp")
    text = json.dumps(record.to_json(cfg), ensure_ascii=False, indent=1, sort_keys=True)
    temporary.write_text(text + "\n", encoding="utf-8")
    temporary.replace(path)
    return path


def load_record(run_dir: Path) -> tuple[TrackingConfig, RunRecord]:
    """The tracking settings and the record saved in ``run_dir/record.json``."""
    path = run_dir / RECORD_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != RECORD_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {RECORD_FORMAT}")
        tracking = from_mapping(TrackingConfig, data["tracking"], "tracking")
        return tracking, RunRecord.from_json(data, run_dir)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RagsweepError) as exc:
        raise RecordError(
            f"{path}: not a run record ({reason(exc)}); only run directories written by "
            "ragsweep (with record.json) can be logged"
        ) from None


def client_for(cfg: TrackingConfig) -> Any:
    """An MlflowClient on the configured store (:func:`ragsweep.tracking.store.open_client`)."""
    return open_client(tracking_uri(cfg), cfg)


def warm_up(cfg: TrackingConfig) -> None:
    """Import what logging a run needs and open ``cfg``'s store and experiment, so the
    first :func:`log_run` of this process does not pay for it (a sweep's logger does this
    while the sweep's first job computes). Failures are left to that first run to report."""
    try:
        ensure_experiment(cfg)
        import mlflow.data.dataset_source_registry
        import mlflow.data.meta_dataset
        import mlflow.store.artifact.artifact_repository_registry  # noqa: F401
    except Exception:  # the first record's log says what is wrong, with its run directory
        return


def ensure_experiment(cfg: TrackingConfig) -> str:
    """Check and create the store and the experiment; return the experiment id (see
    :func:`~ragsweep.tracking.store.prepare_store`)."""
    return prepare_store(cfg)


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


def log_run(cfg: TrackingConfig, record: RunRecord, saved: bool = False) -> str:
    """Save ``record.json`` in the run directory (unless ``saved``: it was read from there),
    create one MLflow run from ``record`` and return its run id.

    If the store fails, the run directory still holds the run (artifacts and
    ``record.json``): the TrackingStoreError says so and gives the ``ragsweep-log`` command
    that logs it later. A run MLflow created before the failure is closed FAILED (best
    effort: the store may be gone), without the ``ragsweep.logged=complete`` tag.
    """
    if not saved:
        save_record(cfg, record)
    try:
        return _write_run(cfg, record)
    except Exception as exc:
        raise not_logged(cfg, record.artifacts_dir, reason(exc)) from exc


def not_logged(cfg: TrackingConfig, run_dir: Path, why: str) -> TrackingStoreError:
    """The error of a run whose directory holds it all but that was not logged (``why``)."""
    return TrackingStoreError(
        f"run directory {run_dir} holds the whole run ({RECORD_FILE} and "
        f"its artifacts) but it was not logged to {_uri_or_config(cfg)}: {why}. "
        f"Log it when the store works again: ragsweep-log {run_dir}"
    )


def _uri_or_config(cfg: TrackingConfig) -> str:
    try:
        return tracking_uri(cfg)
    except RagsweepError:
        return "the tracking store"


def _write_run(cfg: TrackingConfig, record: RunRecord) -> str:
    experiment_id = ensure_experiment(cfg)  # checked once per process for a local store
    client = client_for(cfg)
    tags = {**record.tags, tag.RECORD_ID: record.record_id}
    run = client.create_run(experiment_id, tags=tags, run_name=record.run_name)
    run_id = str(run.info.run_id)
    try:
        if record.dataset is not None:
            _log_dataset(client, run_id, record.dataset)
        _upload(str(run.info.artifact_uri), client.tracking_uri, record.artifacts_dir)
        size = MAX_BATCH_ENTITIES if is_local(client.tracking_uri) else BATCH
        _finish(
            client, run_id, record.status, packed_batches(record, int(run.info.start_time), size)
        )
    except Exception:
        _close_failed(client, run_id)
        raise
    return run_id


def _upload(artifact_uri: str, tracking: str, run_dir: Path) -> None:
    """Copy :func:`uploaded_files` to the run's artifact location, ``cases.jsonl``
    gzip-compressed beside the table (:func:`ragsweep.tracking.artifacts.stored_copy`). The
    repository is made from the ``artifact_uri`` the new run came with:
    ``client.log_artifact`` would first fetch the whole run (every metric) to look it up."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    repository = get_artifact_repository(artifact_uri, tracking_uri=tracking)
    with tempfile.TemporaryDirectory(prefix="ragsweep-upload-") as scratch:
        for path in uploaded_files(run_dir):
            folder = path.parent.relative_to(run_dir).as_posix()
            stored = stored_copy(path, Path(scratch))
            repository.log_artifact(str(stored), None if folder == "." else folder)


def _finish(
    client: Any, run_id: str, status: str, batches: Iterator[tuple[list[Any], list[Any]]]
) -> None:
    """Log the params and metrics ``batches``, the last one with the
    ``ragsweep.logged=complete`` tag, and close the run. MLflow stores a batch's params,
    then its metrics, then its tags, so the tag readers require still lands after
    everything else; riding in the last batch saves a transaction per run."""
    from mlflow.entities import RunTag

    pending = list(batches) or [([], [])]
    for params, metrics in pending[:-1]:
        client.log_batch(run_id, params=params, metrics=metrics)
    params, metrics = pending[-1]
    client.log_batch(
        run_id, params=params, metrics=metrics, tags=[RunTag(tag.LOGGED, tag.LOGGED_COMPLETE)]
    )
    client.set_terminated(run_id, status=status)


def packed_batches(
    record: RunRecord, timestamp_ms: int, size: int = MAX_BATCH_ENTITIES
) -> Iterator[tuple[list[Any], list[Any]]]:
    """The record's params and metrics as ``(params, metrics)`` for ``log_batch`` calls of
    at most ``size`` entities (MLflow allows ``MAX_BATCH_ENTITIES``, of them at most
    ``BATCH`` params); every metric at step 0 and ``timestamp_ms``. Each call to a local
    store costs a transaction, so one call instead of one per hundred metrics saves most of
    the logging time; to a server, each call is a request that must finish within
    ``tracking.timeout``, so calls stay small there."""
    from mlflow.entities import Metric, Param

    params = [Param(k, v) for k, v in sorted(record.params.items())]
    metrics = [Metric(k, float(v), timestamp_ms, 0) for k, v in sorted(record.metrics.items())]
    while params or metrics:
        some_params, params = params[:BATCH], params[BATCH:]
        room = size - len(some_params)
        some_metrics, metrics = metrics[:room], metrics[room:]
        yield some_params, some_metrics


SKIPPED_UPLOADS = frozenset({RECORD_FILE, LOG_FILE, *LOCAL_ONLY_FILES})
"""Run-directory files not uploaded: ``record.json`` holds what the run itself receives as
params, metrics and tags (it stays in the directory for ``ragsweep-log``);
``ragsweep-log.txt`` is being written by the background logger that uploads;
``chunks.jsonl`` stays local to keep the artifact budget
(:data:`ragsweep.tracking.artifacts.LOCAL_ONLY_FILES`)."""


def uploaded_files(run_dir: Path) -> list[Path]:
    """The files of ``run_dir`` (recursively, in name order) that become the run's
    artifacts: all but :data:`SKIPPED_UPLOADS` and empty files (Hydra's ``cli.log`` is
    empty unless something was logged through Python's ``logging``). Each is stored under
    :func:`ragsweep.tracking.artifacts.stored_name`."""
    return [
        path
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and path.name not in SKIPPED_UPLOADS and path.stat().st_size > 0
    ]


def _close_failed(client: Any, run_id: str) -> None:
    try:
        client.set_terminated(run_id, status=FAILED)
    except Exception:  # the store that just failed may be gone: the error says what to do
        return


def log_run_once(cfg: TrackingConfig, record: RunRecord, saved: bool = False) -> str:
    """:func:`log_run`, mending what an interrupted log of the same record (its
    ``record_id``) left: a complete run still RUNNING is closed with the record's status
    and returned; an incomplete one still RUNNING is closed FAILED (readers ignore it)
    before the record is logged again."""
    experiment_id = ensure_experiment(cfg)
    client = client_for(cfg)
    earlier = client.search_runs(
        [experiment_id], filter_string=f"tags.`{tag.RECORD_ID}` = '{record.record_id}'"
    )
    for run in earlier:
        run_id, running = str(run.info.run_id), run.info.status == RUNNING
        if run.data.tags.get(tag.LOGGED) == tag.LOGGED_COMPLETE:
            if running:
                client.set_terminated(run_id, status=record.status)
            return run_id
        if running:
            client.set_terminated(run_id, status=FAILED)
    return log_run(cfg, record, saved)


def find_logged(cfg: TrackingConfig, record: RunRecord) -> str | None:
    """The id of a complete run already logged from ``record`` (its ``record_id``), if any."""
    experiment_id = ensure_experiment(cfg)
    runs = client_for(cfg).search_runs(
        [experiment_id],
        filter_string=(
            f"tags.`{tag.RECORD_ID}` = '{record.record_id}' and tags.`{tag.LOGGED}` = 'complete'"
        ),
        max_results=1,
    )
    return str(runs[0].info.run_id) if runs else None


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
            duplicate = any(message in str(exc) for message in DUPLICATE_KEY_MESSAGES)
            if not duplicate or attempt == DATASET_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
