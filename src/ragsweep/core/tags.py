"""The MLflow tag vocabulary: every tag key ragsweep writes or reads, defined once.

Writers (the pipeline, the sweeper, promotion, comparison, the judge) and readers (the run
store, the gate, resume) import these constants; no tag key is spelled anywhere else. Each
tag has one meaning (docs/tracking.md lists them).
"""

from __future__ import annotations

from typing import NamedTuple

PREFIX = "ragsweep."

# --- identity of a run's result -------------------------------------------------------
CONFIG_HASH = "ragsweep.config_hash"
"""sha256 of every result-affecting config value (``RunConfig.config_hash``)."""
CORPUS_HASH = "ragsweep.corpus_hash"
"""Content hash of the corpus the run read."""
GOLDEN_DIGEST = "ragsweep.golden_digest"
"""Digest of the golden set file."""
SPLIT = "ragsweep.split"
"""The golden split the run scored (``eval.split``: tuning or holdout)."""
MIN_SPAN_OVERLAP = "ragsweep.min_span_overlap"
"""The relevance rule's threshold (``eval.min_span_overlap``), as ``repr`` of the float."""
EMBEDDING_BACKEND = "ragsweep.embedding.backend"
EMBEDDING_MODEL = "ragsweep.embedding.model"
EMBEDDING_VERSION = "ragsweep.embedding.version"
EMBEDDING_DIMENSION = "ragsweep.embedding.dimension"
EMBEDDING_DIGEST = "ragsweep.embedding.digest"
VERSION = "ragsweep.version"
"""The ragsweep package version."""
GIT_COMMIT = "ragsweep.git_commit"
"""The project's git commit (``-dirty`` with local changes), or ``unknown``."""

# --- bookkeeping ----------------------------------------------------------------------
LOGGED = "ragsweep.logged"
"""``complete`` once every param, metric and artifact of the run is in the store."""
LOGGED_COMPLETE = "complete"
"""The value of :data:`LOGGED` once every metric, tag and artifact of a run is logged."""
ERROR = "ragsweep.error"
"""Why a job failed (first characters of the error)."""
RECORD_ID = "ragsweep.record_id"
"""The id of the run's ``record.json``: ``ragsweep-log`` never logs one record twice."""
TYPE_KEYS = "ragsweep.type_keys"
"""JSON ``{key: type}`` for question types whose metric key differs from the type's name
(``by_type/R_D-…/recall_at_5`` for type ``R&D``; see ``ragsweep.eval.metric_keys``)."""

# --- sweeps ---------------------------------------------------------------------------
SWEEP = "ragsweep.sweep"
"""The sweep's name (on the parent and every child)."""
SWEEP_ROLE = "ragsweep.sweep_role"
"""``parent`` (:data:`PARENT_ROLE`) on a sweep's parent run."""
PARENT_ROLE = "parent"
SWEEP_OWNER = "ragsweep.sweep_owner"
"""``host:pid`` of the process driving the sweep (resume never takes over a live one)."""
SWEEP_RELEASED = "ragsweep.sweep_released"
"""The last claim generation whose owner let go of the parent (set when a sweep ends)."""
SWEEP_GOLDEN = "ragsweep.sweep_golden_digest"
"""On a sweep's jobs: the golden set's content digest when the sweep started."""
SWEEP_CORPUS = "ragsweep.sweep_corpus_digest"
"""On a sweep's jobs: the corpus's content digest when the sweep started."""
SWEEP_CORPUS_FILES = "ragsweep.sweep_corpus_files_digest"
"""On the jobs of a sweep over parsers: the digest of the corpus's source files when the
sweep started (:func:`ragsweep.data.corpus.corpus_files_digest`; the texts differ by parser)."""
SWEEP_FILE = "ragsweep.sweep_file"
SWEEP_DIGEST = "ragsweep.sweep_digest"
"""Digest of the sweep definition; resume finds the parent by it."""
SWEEP_AXES = "ragsweep.sweep_axes"
SWEEP_MULTI_FACTOR = "ragsweep.sweep_multi_factor"
"""On the parent: the axes with ``allow_multi_factor`` that change other result-affecting
values too, and those keys (``axis 1 (chunking): chunking.overlap, chunking.size``)."""
OBJECTIVE = "ragsweep.objective"
DIRECTION = "ragsweep.direction"
AXIS = "ragsweep.axis"
AXIS_INDEX = "ragsweep.axis_index"
AXIS_VALUE = "ragsweep.axis_value"
SEARCH_TRIAL = "ragsweep.search_trial"
"""On a child launched by a sweep's search (``strategy: optuna``): the trial's number."""
BEST = "ragsweep.best"
"""``true`` on the sweep's best child."""
BEST_RUN_ID = "ragsweep.best_run_id"
"""On the parent: the run id of the best child."""
CHOSEN = "ragsweep.chosen"
"""On a child, once its axis is decided: ``true`` if its value was kept, else ``false``."""

# --- release --------------------------------------------------------------------------
PROMOTED_FROM = "ragsweep.promoted_from"
"""On a holdout run: the tuning run whose config was promoted."""
HOLDOUT_EVALUATIONS = "ragsweep.holdout_evaluations"
"""How many holdout evaluations of this golden set the store holds, this one included."""
COMPARED_WITH = "ragsweep.compared_with"

# --- judge (docs/judge.md, "Outputs"); unknown values are logged as none/unknown -------
JUDGE_API = "ragsweep.judge.api"
"""``ollama`` or ``openai`` (``judge.api``)."""
JUDGE_SERVER_VERSION = "ragsweep.judge.server_version"
"""The chat server's version as it reports it (``unknown`` if it does not)."""
JUDGE_GENERATOR = "ragsweep.judge.generator"
"""The configured generator (``answers:<file>`` for fixed answers)."""
JUDGE_GENERATOR_ID = "ragsweep.judge.generator_id"
"""The model id the server serves the generator under."""
JUDGE_GENERATOR_DIGEST = "ragsweep.judge.generator_digest"
"""sha256 of the generator's weights or manifest, ``none`` when the server gives no way to
know it (see ``JUDGE_GENERATOR_DIGEST_SOURCE``)."""
JUDGE_GENERATOR_DIGEST_SOURCE = "ragsweep.judge.generator_digest_source"
"""``ollama-manifest``, ``file-sha256``, ``answers-file`` or ``none``."""
JUDGE_GENERATOR_VERSION = "ragsweep.judge.generator_version"
"""The hash of the server's listing entry for the generator (``models:<hash>``)."""
JUDGE_JUDGE = "ragsweep.judge.judge"
JUDGE_JUDGE_ID = "ragsweep.judge.judge_id"
JUDGE_JUDGE_DIGEST = "ragsweep.judge.judge_digest"
JUDGE_JUDGE_DIGEST_SOURCE = "ragsweep.judge.judge_digest_source"
JUDGE_JUDGE_VERSION = "ragsweep.judge.judge_version"
JUDGE_RUBRIC = "ragsweep.judge.rubric_sha256"
"""sha256 of the rubric's content."""
JUDGE_TEMPERATURE = "ragsweep.judge.temperature"
JUDGE_SEED = "ragsweep.judge.seed"
JUDGE_OUTPUT_MODE = "ragsweep.judge.output_mode"
"""How JSON verdicts were asked for (``json_schema``, ``json_object+schema``,
``ollama-format-schema``, ...); several, comma-separated, if cached verdicts differ."""
JUDGE_SCHEMA_HONOURED = "ragsweep.judge.schema_honoured"
"""``true``: the verdict schema was sent and no reply broke it; ``false``: a reply broke it
(the server ignored the schema); ``not_requested``: no mode carrying the schema was accepted."""
JUDGE_AGREEMENT_BELOW_FLOOR = "ragsweep.judge.agreement_below_floor"
"""Axes whose agreement with human verdicts is below a floor, or ``none``."""


class ModelTags(NamedTuple):
    """The tag keys that identify one model role of the judge stage."""

    name: str
    served_id: str
    digest: str
    digest_source: str
    version: str


JUDGE_GENERATOR_TAGS = ModelTags(
    JUDGE_GENERATOR,
    JUDGE_GENERATOR_ID,
    JUDGE_GENERATOR_DIGEST,
    JUDGE_GENERATOR_DIGEST_SOURCE,
    JUDGE_GENERATOR_VERSION,
)
JUDGE_MODEL_TAGS = ModelTags(
    JUDGE_JUDGE, JUDGE_JUDGE_ID, JUDGE_JUDGE_DIGEST, JUDGE_JUDGE_DIGEST_SOURCE, JUDGE_JUDGE_VERSION
)

# --- MLflow's own ---------------------------------------------------------------------
PARENT_RUN_ID = "mlflow.parentRunId"
"""MLflow's nesting tag: the parent run of a sweep child."""
RUN_NAME = "mlflow.runName"
"""MLflow's run name (shown in the runs table)."""
NOTE = "mlflow.note.content"
"""MLflow's run description (Markdown, shown on the run page): what the run was for, and in
a sweep the axis, value, decision and link to the parent (``ragsweep.run.notes``)."""
LOGGED_ARTIFACTS = "mlflow.loggedArtifacts"
"""MLflow's list of the run's table artifacts, JSON ``[{"path": ..., "type": "table"}]``
(``ragsweep.tracking.tables``)."""
EXPERIMENT_KIND = "mlflow.experimentKind"
"""MLflow's experiment tag for the experiment's kind (the UI's experiment-kind selector
writes it): ``custom_model_development`` ("Model training": runs, models) or
``genai_development`` (traces). MLflow 3.17.2's UI does not read it to pick the page an
experiment opens on (the browser's workflow switch does, see ``ragsweep.cli.ui``); ragsweep
sets it so that the experiment says what it holds."""
RUNS_TABLE_KIND = "custom_model_development"
"""The ``EXPERIMENT_KIND`` value of ragsweep's experiments (runs, not traces)."""

IDENTITY = (GOLDEN_DIGEST, SPLIT, CORPUS_HASH, MIN_SPAN_OVERLAP)
"""Tags two runs must share for their per-case results to be comparable."""
