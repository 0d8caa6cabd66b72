"""Read access to logged runs: the MLflow store is the record the release tools work from.

Promotion reads a tuning run's ``config.yaml``, comparison reads both runs' ``cases.jsonl``,
and holdout counting, ``--best`` and the gate search runs by tag. The store is the one the
current environment points at (``--tracking-uri``, else ``MLFLOW_TRACKING_URI``, else the
project's ``tracking`` config), never one named inside an old run's config.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from ragsweep.config.app import compose, plain_config
from ragsweep.config.schema import TrackingConfig, from_mapping
from ragsweep.core import tags as tag
from ragsweep.core.names import CASES_FILE, FINISHED
from ragsweep.data.corpus import jsonl_lines
from ragsweep.eval.scoring import CaseResult, cases_from_jsonl
from ragsweep.release.errors import EMPTY_RUN_ID, RunLookupError
from ragsweep.run.metrics import BY_TYPE_FILE, FIGURES_FILE, by_type_figures, read_figures
from ragsweep.tracking.artifacts import artifact_text
from ragsweep.tracking.store import open_client, tracking_uri
from ragsweep.tracking.tables import read_table


@dataclass(frozen=True)
class LoggedRun:
    """One MLflow run as the release tools see it. ``start_time_ms`` is epoch milliseconds."""

    run_id: str
    name: str
    experiment_id: str
    status: str
    start_time_ms: int
    tags: dict[str, str]
    metrics: dict[str, float]
    """Its MLflow metrics, or every figure of the run when read by ``RunStore.get`` or
    ``RunStore.with_figures``."""

    def tag(self, key: str) -> str:
        """The tag ``key``; a run without it is not a (complete) ragsweep run."""
        try:
            return self.tags[key]
        except KeyError:
            raise RunLookupError(
                f"run {self.run_id} has no tag {key!r}; is it a ragsweep evaluation run?"
            ) from None

    def require_complete(self) -> None:
        """Refuse runs that failed or were logged only in part."""
        if self.status != FINISHED or self.tags.get(tag.LOGGED) != tag.LOGGED_COMPLETE:
            raise RunLookupError(
                f"run {self.run_id} is not a complete ragsweep run (status {self.status}, "
                f"{tag.LOGGED}={self.tags.get(tag.LOGGED)!r})"
            )


def current_config(overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The project's current resolved config: ``conf/`` defaults plus ``overrides``."""
    return plain_config(compose(overrides))


def current_tracking_uri(config: Mapping[str, Any], uri: str | None = None) -> str:
    """``uri`` if given, else what ``config``'s tracking group resolves to (which honours
    ``MLFLOW_TRACKING_URI``)."""
    tracking = from_mapping(TrackingConfig, config["tracking"], "tracking")
    return tracking_uri(replace(tracking, uri=uri) if uri else tracking)


class RunStore:
    """An existing MLflow tracking store, read by run id or by tag search."""

    def __init__(self, uri: str) -> None:
        if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
            raise RunLookupError(
                f"no MLflow store at {uri}: nothing has been logged there yet "
                "(pass --tracking-uri or set MLFLOW_TRACKING_URI)"
            )
        self.uri = uri
        self.client = open_client(uri)  # a local store is opened under its store lock
        self._cases_texts: dict[str, str] = {}  # cases.jsonl read by cases(), for questions()

    def get(self, run_id: str) -> LoggedRun:
        """The run ``run_id``, or a RunLookupError naming the store (an empty id too)."""
        from mlflow.exceptions import MlflowException

        if not run_id.strip():
            raise RunLookupError(EMPTY_RUN_ID)
        try:
            run = self.client.get_run(run_id)
        except MlflowException as exc:
            raise RunLookupError(f"no run {run_id!r} in {self.uri}") from exc
        return self.with_figures(_logged_run(run))

    def with_figures(self, run: LoggedRun) -> LoggedRun:
        """``run`` with every figure it computed as its metrics: its ``figures.json`` and
        ``by_type.json`` tables over its MLflow metrics, which hold only the headline set
        (:mod:`ragsweep.run.metrics`); a run without the tables keeps its metrics."""
        try:
            text = self._artifact_text(run.run_id, FIGURES_FILE)
        except RunLookupError:
            return run
        try:
            figures = read_figures(text, f"{FIGURES_FILE} of run {run.run_id}")
        except ValueError as exc:
            raise RunLookupError(str(exc)) from exc
        return replace(run, metrics={**run.metrics, **self._by_type(run.run_id), **figures})

    def _by_type(self, run_id: str) -> dict[str, float]:
        """The per-type figures of the run's ``by_type.json`` (none without the table)."""
        try:
            text = self._artifact_text(run_id, BY_TYPE_FILE)
        except RunLookupError:
            return {}
        source = f"{BY_TYPE_FILE} of run {run_id}"
        try:
            return by_type_figures(read_table(text, source))
        except (ValueError, KeyError, TypeError) as exc:
            raise RunLookupError(f"{source}: {exc}") from exc

    def experiment_name(self, experiment_id: str) -> str:
        return str(self.client.get_experiment(experiment_id).name)

    def config(self, run_id: str) -> dict[str, Any]:
        """The run's logged ``config.yaml`` (the full resolved config) as plain data."""
        data = yaml.safe_load(self._artifact_text(run_id, "config.yaml"))
        if not isinstance(data, dict):
            raise RunLookupError(f"config.yaml of run {run_id} is not a mapping")
        return data

    def cases(self, run_id: str) -> tuple[CaseResult, ...]:
        """The run's per-case results from its ``cases.jsonl`` artifact, in file order (the
        text is kept for :meth:`questions`, which then fetches nothing)."""
        text = self._artifact_text(run_id, CASES_FILE)
        self._cases_texts[run_id] = text
        try:
            return cases_from_jsonl(text, f"{CASES_FILE} of run {run_id}")
        except ValueError as exc:
            raise RunLookupError(str(exc)) from exc

    def questions(self, run_id: str) -> dict[str, str]:
        """Case id → question, from the run's ``cases.jsonl`` artifact (the question as the
        run's case table keeps it: cut to 150 characters)."""
        text = self._cases_texts.get(run_id) or self._artifact_text(run_id, CASES_FILE)
        rows = (json.loads(line) for line in jsonl_lines(text) if line.strip())
        return {row["id"]: row["question"] for row in rows if row.get("question") is not None}

    def search(self, filter_string: str, limit: int | None = None) -> list[LoggedRun]:
        """Runs of every experiment (deleted ones included) matching ``filter_string``,
        newest first."""
        from mlflow.entities import ViewType

        runs: list[LoggedRun] = []
        experiment_ids = self._experiment_ids()
        token = None
        while True:
            page = self.client.search_runs(
                experiment_ids,
                filter_string,
                run_view_type=ViewType.ALL,
                max_results=min(limit or 1000, 1000),
                order_by=["attributes.start_time DESC"],
                page_token=token,
            )
            runs.extend(_logged_run(run) for run in page)
            token = page.token
            if not token or (limit is not None and len(runs) >= limit):
                return runs[:limit] if limit is not None else runs

    def latest(self, filter_string: str) -> LoggedRun | None:
        """The newest complete run matching ``filter_string``, if any."""
        complete = f"attributes.status = '{FINISHED}' AND tags.\"{tag.LOGGED}\" = 'complete'"
        found = self.search(f"{filter_string} AND {complete}" if filter_string else complete, 1)
        return found[0] if found else None

    def artifact_text(self, run_id: str, path: str) -> str:
        """The text of artifact ``path`` of run ``run_id``, a run-directory file name
        (``cases.jsonl`` is read from ``cases.jsonl.gz`` when the run has it); a
        RunLookupError if absent."""
        return self._artifact_text(run_id, path)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        self.client.log_text(run_id, text, artifact_file)

    def set_tag(self, run_id: str, key: str, value: str) -> None:
        self.client.set_tag(run_id, key, value)

    def _experiment_ids(self) -> list[str]:
        from mlflow.entities import ViewType

        ids: list[str] = []
        token = None
        while True:
            page = self.client.search_experiments(view_type=ViewType.ALL, page_token=token)
            ids.extend(str(e.experiment_id) for e in page)
            token = page.token
            if not token:
                return ids

    def _artifact_text(self, run_id: str, path: str) -> str:
        """:func:`ragsweep.tracking.artifacts.artifact_text` (compressed or not), with a
        RunLookupError when the run lacks the artifact or it cannot be read."""
        try:
            return artifact_text(self.client, run_id, path)
        except (OSError, UnicodeDecodeError) as exc:
            raise RunLookupError(str(exc)) from exc


def _logged_run(run: Any) -> LoggedRun:
    return LoggedRun(
        run_id=str(run.info.run_id),
        name=str(run.info.run_name or ""),
        experiment_id=str(run.info.experiment_id),
        status=str(run.info.status),
        start_time_ms=int(run.info.start_time or 0),
        tags=dict(run.data.tags),
        metrics={k: float(v) for k, v in run.data.metrics.items()},
    )
