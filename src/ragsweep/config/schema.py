"""Typed, validated stage configurations, and the machinery that builds them.

Hydra composes a DictConfig from ``conf/``; :meth:`ragsweep.run.config.RunConfig.from_container`
turns each group into the frozen dataclass of its stage (:func:`from_mapping`) and validates
it before any work starts. Stage functions receive only their own dataclass.

Field metadata is what hashing reads: a field declared with :func:`not_hashed` does not
change a result (thread counts, batch sizes, output paths) and is left out of
:func:`result_fields`; a field declared with :func:`hashed_in` belongs to a later stage's
cache key than its group's own (``chunking.heading_prefix`` changes the indexed texts, not
the chunk spans). Every other field is hashed, so a new field changes the config hash and
its stage's key unless it is declared not to.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ragsweep.core.errors import ConfigError, RagsweepError
from ragsweep.core.names import ACL_MODES, ACL_PRE, CHARS, CHUNK_UNITS, HOLDOUT, SPLITS, TUNING
from ragsweep.core.registry import did_you_mean

C = TypeVar("C")

SWEEPABLE_GROUPS = ("preprocess", "chunking", "embedding", "retrieval", "rerank", "judge")
"""The config groups a sweep axis may vary: the retrieval (and generation) stack. The other
hashed groups (corpus, golden, eval) define what is measured, so objectives are only
comparable when they are held."""


SWEEPABLE_KEYS = ("corpus.html_parser", "corpus.pdf_parser", "corpus.docx_parser")
"""Keys outside :data:`SWEEPABLE_GROUPS` a sweep axis may vary: the parser axis (the same
files read by another parser; the golden set is resolved on each parser's text)."""


OWN_STAGE = "own"
"""The stage of a field declared without :func:`hashed_in`: its config group's own."""


def not_hashed(default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """A dataclass field that does not affect results and is excluded from config hashes."""
    if default is dataclasses.MISSING:
        return field(metadata={"affects_result": False}, **kwargs)
    return field(default=default, metadata={"affects_result": False}, **kwargs)


def hashed_in(stage: str, default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """A result-affecting field whose stage cache key is ``stage``'s, not its group's own
    (it is still part of the config hash)."""
    if default is dataclasses.MISSING:
        return field(metadata={"stage": stage}, **kwargs)
    return field(default=default, metadata={"stage": stage}, **kwargs)


def hashed_unless_default(default: Any, stage: str = OWN_STAGE) -> Any:
    """A result-affecting field left out of config hashes while it holds its default: a
    field added later, so that configurations that do not set it hash as they did before
    (``stage`` as for :func:`hashed_in`)."""
    return field(default=default, metadata={"omit_default": True, "stage": stage})


def is_hashed(f: dataclasses.Field[Any]) -> bool:
    """Whether a dataclass field affects results (see the module docstring)."""
    return f.metadata.get("affects_result", True) is not False


def result_fields(obj: Any, stage: str | None = None) -> dict[str, Any]:
    """The fields of a config dataclass that affect results, recursively, as plain values.

    With ``stage``, only the fields of that stage: :data:`OWN_STAGE` for those declared
    without :func:`hashed_in`, or the name given to :func:`hashed_in`.
    """
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not is_hashed(f):
            continue
        if stage is not None and f.metadata.get("stage", OWN_STAGE) != stage:
            continue
        value = getattr(obj, f.name)
        if f.metadata.get("omit_default") and value == f.default:
            continue
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = result_fields(value)
        out[f.name] = value
    return out


def _coerce(value: Any, annotation: Any, key: str) -> Any:
    """Check ``value`` against a (simple) type annotation; lists become tuples."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{key}: unexpected value {value!r}")
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key} must be a list, got {value!r}")
        inner = args[0] if args else Any
        return tuple(_coerce(v, inner, f"{key}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping) or annotation in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key} must be a mapping, got {value!r}")
        return dict(value)
    if annotation is Any:
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} must be a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string, got {value!r}")
        return value
    return value


def from_mapping(cls: type[C], data: Mapping[str, Any] | None, prefix: str) -> C:
    """Build config dataclass ``cls`` from ``data``, naming ``prefix.key`` in every error."""
    data = dict(data or {})
    hints = typing.get_type_hints(cls)
    fields_by_name = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(fields_by_name))
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, list(fields_by_name), n=1, cutoff=0.6)
        hint = f"; did you mean {prefix}.{close[0]}?" if close else ""
        allowed = ", ".join(sorted(fields_by_name))
        raise ConfigError(f"{prefix}.{name} is not a known key (allowed: {allowed}){hint}")
    kwargs: dict[str, Any] = {}
    for name, f in fields_by_name.items():
        if name not in data:
            no_default = (
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            )
            if no_default:
                raise ConfigError(f"{prefix}.{name} is required")
            continue
        kwargs[name] = _coerce(data[name], hints[name], f"{prefix}.{name}")
    return cls(**kwargs)


def read_yaml_mapping(
    path: str | Path, what: str, error: type[RagsweepError] = ConfigError
) -> dict[str, Any]:
    """The YAML mapping in ``path``; ``error`` names the file when it cannot be read, is not
    YAML, or is not a mapping (``what`` says what the file should be, e.g. "a sweep file")."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise error(f"{path}: cannot read {what}: {exc}") from None
    if not isinstance(data, Mapping):
        raise error(f"{path}: {what} is a mapping of keys, got {type(data).__name__}")
    return dict(data)


def load_config_file(
    cls: type[C],
    path: str | Path,
    prefix: str,
    what: str,
    error: type[RagsweepError] = ConfigError,
) -> C:
    """Read ``path`` (YAML) into config dataclass ``cls``; every error names the file."""
    data = read_yaml_mapping(path, what, error)
    try:
        return from_mapping(cls, data, prefix)
    except ConfigError as exc:
        raise error(f"{path}: {exc}") from None


def check_all(prefix: str, obj: Any, checks: Sequence[tuple[bool, str, str]]) -> None:
    """Raise ConfigError for the first failed ``(ok, key, rule)`` check as
    ``prefix.key=value must be rule``."""
    for ok, key, rule in checks:
        if not ok:
            raise ConfigError(f"{prefix}.{key}={getattr(obj, key)!r} must be {rule}")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


@dataclass(frozen=True)
class PathsConfig:
    """Every filesystem location ragsweep uses, in one place (``conf/paths``): the project
    (``root_dir``, outputs and caches below it) and the packaged data (``data_dir``, the
    demo data below it; never written to)."""

    root_dir: str = not_hashed()
    output_dir: str = not_hashed()
    cache_dir: str = not_hashed()
    data_dir: str = not_hashed()
    demo_dir: str = not_hashed()


@dataclass(frozen=True)
class CorpusConfig:
    """Where the documents are: a directory (recursive) or a JSONL file.

    ``extensions`` are the files read as text. ``html_parser``, ``pdf_parser`` and
    ``docx_parser`` name the parser of ``.html``/``.htm``, ``.pdf`` and ``.docx`` files
    (:mod:`ragsweep.data.parsers`; ``off``: not read); they are hashed only when they differ
    from their defaults, so configurations from before they existed keep their hash.

    ``follow_external_links``: read files that symbolic links inside the directory point to
    outside it (off: such a link is an error naming it). Not hashed: the documents read
    are, through the corpus content hash.
    """

    path: str = not_hashed()
    name: str = not_hashed("corpus")
    extensions: tuple[str, ...] = (".md", ".markdown", ".txt")
    follow_external_links: bool = not_hashed(False)
    html_parser: str = hashed_unless_default("markdownify")
    pdf_parser: str = hashed_unless_default("pypdf")
    docx_parser: str = hashed_unless_default("python-docx")

    def __post_init__(self) -> None:
        _require(bool(self.path), "corpus.path must name a directory or a .jsonl file")
        for ext in self.extensions:
            _require(ext.startswith("."), f"corpus.extensions entries start with '.', got {ext!r}")


@dataclass(frozen=True)
class GoldenConfig:
    """The golden question set (JSONL) and how cases without a split are assigned one."""

    path: str = not_hashed()
    holdout_fraction: float = 1 / 3

    def __post_init__(self) -> None:
        _require(bool(self.path), "golden.path must name a .jsonl file")
        _require(
            0.0 <= self.holdout_fraction < 1.0,
            f"golden.holdout_fraction={self.holdout_fraction} must be in [0, 1)",
        )


@dataclass(frozen=True)
class PreprocessConfig:
    """Text normalization applied to indexed chunk text and to queries (never to offsets).

    ``steps`` run in order; each name comes from the normalizer registry
    (``cleanup``, ``nfkc``, ``casefold``, ``synonyms``).
    """

    name: str = not_hashed("none")
    steps: tuple[str, ...] = ()
    synonyms_path: str | None = not_hashed(None)

    def __post_init__(self) -> None:
        _require(
            "synonyms" not in self.steps or bool(self.synonyms_path),
            "preprocess.synonyms_path is required when preprocess.steps contains 'synonyms'",
        )


@dataclass(frozen=True)
class ChunkingConfig:
    """How source documents are cut into chunks. Sizes (``size``, ``overlap``) are in
    characters (code points), or with ``unit: tokens`` in the tokens of ``tokenizer``: a
    ``tokenizer.json`` file, a model folder holding one, or ``pkg:PACKAGE/FOLDER``; empty:
    the embedding model's own tokenizer, or a documented fallback when it has none
    (:mod:`ragsweep.index.chunk_tokens`). Both are hashed only off their defaults.

    ``breakpoint_percentile`` (``mode: semantic``): a chunk ends where the distance between
    neighbouring sentences is above this percentile of the document's distances.

    ``heading_prefix`` prepends a chunk's heading path to its indexed text, ``title_prefix``
    its document's title (contextual headers): they change the texts stage, not the chunk
    spans, offsets or evidence.
    """

    mode: str = "fixed"
    size: int = 800
    overlap: int = 0
    heading_prefix: bool = hashed_in("texts", False)
    title_prefix: bool = hashed_unless_default(False, "texts")
    unit: str = hashed_unless_default(CHARS)
    tokenizer: str = hashed_unless_default("")
    breakpoint_percentile: float = hashed_unless_default(95.0)

    def __post_init__(self) -> None:
        _require(
            self.unit in CHUNK_UNITS,
            f"chunking.unit={self.unit!r} must be one of: {', '.join(CHUNK_UNITS)}",
        )
        _require(
            0.0 <= self.breakpoint_percentile <= 100.0,
            f"chunking.breakpoint_percentile={self.breakpoint_percentile} must be in [0, 100]",
        )
        _require(self.size > 0, f"chunking.size={self.size} must be > 0")
        _require(
            0 <= self.overlap < self.size,
            f"chunking.overlap={self.overlap} must satisfy 0 <= overlap < chunking.size "
            f"(={self.size})",
        )


@dataclass(frozen=True)
class EmbeddingConfig:
    """The representation chunks and queries are indexed with.

    ``backend`` names a registered backend (``bm25``, ``use_m3``, ...); ``options`` are
    validated by that backend's own options dataclass, which also declares which options
    affect results.
    """

    backend: str
    model: str = ""
    options: dict[str, Any] = field(default_factory=dict)


PARENTS_STAGE = "parents"
"""The stage of ``retrieval.parent`` and ``retrieval.parent_chars``: applied to rankings of
chunks (which they do not change) before scoring; in the config hash, not the rankings key."""


@dataclass(frozen=True)
class RetrievalConfig:
    """How many chunks are retrieved per question, whether a case's scope is enforced, how
    document access is enforced (``acl``, docs/retrieval.md "Document access"), whether
    superseded documents are left out (``latest_only``), and what is handed back for a
    ranked chunk: itself (``parent: none``) or its parent unit (small-to-big: ``section``,
    ``paragraph``, or a ``window`` of ``parent_chars`` characters around it;
    :mod:`ragsweep.chunk.parents`). Every field but the first two is hashed only when set
    away from its default, so configurations that do not set them keep their hash."""

    top_k: int | None = None
    respect_scope: bool = True
    acl: str = hashed_unless_default(ACL_PRE)
    latest_only: bool = hashed_unless_default(False)
    parent: str = hashed_unless_default("none", PARENTS_STAGE)
    parent_chars: int = hashed_unless_default(1000, PARENTS_STAGE)

    def __post_init__(self) -> None:
        _require(self.top_k is None or self.top_k > 0, f"retrieval.top_k={self.top_k} must be > 0")
        _require(
            self.acl in ACL_MODES,
            f"retrieval.acl={self.acl!r} is not one of: {', '.join(ACL_MODES)}"
            f"{did_you_mean(self.acl, ACL_MODES)}",
        )
        _require(self.parent_chars > 0, f"retrieval.parent_chars={self.parent_chars} must be > 0")


@dataclass(frozen=True)
class EvalConfig:
    """Which split is scored, at which cut-offs and context budgets, and what counts as a
    hit. ``budgets`` are in characters (docs/metrics.md); ``bootstrap_resamples`` and
    ``seed`` set the 95% bootstrap interval of every reported mean (they change no metric,
    only its interval, so they are not hashed)."""

    ks: tuple[int, ...] = (1, 3, 5, 10)
    budgets: tuple[int, ...] = (1000, 2000, 4000)
    split: str = TUNING
    min_span_overlap: float = 1.0
    objective: str = not_hashed("recall_at_5")
    allow_holdout: bool = not_hashed(False)
    bootstrap_resamples: int = not_hashed(1000)
    seed: int = not_hashed(0)

    def __post_init__(self) -> None:
        _require(len(self.ks) > 0, "eval.ks must list at least one cut-off")
        for key, values in (("ks", self.ks), ("budgets", self.budgets)):
            _require(all(v > 0 for v in values), f"eval.{key}={list(values)} must all be > 0")
            _require(
                list(values) == sorted(set(values)),
                f"eval.{key}={list(values)} must be strictly increasing",
            )
        _require(
            self.bootstrap_resamples >= 1,
            f"eval.bootstrap_resamples={self.bootstrap_resamples} must be >= 1",
        )
        _require(self.seed >= 0, f"eval.seed={self.seed} must be >= 0")
        _require(
            self.split in SPLITS, f"eval.split={self.split!r} is not one of: {', '.join(SPLITS)}"
        )
        _require(
            0.0 < self.min_span_overlap <= 1.0,
            f"eval.min_span_overlap={self.min_span_overlap} must be in (0, 1]",
        )
        _require(
            self.split != HOLDOUT or self.allow_holdout,
            "eval.split=holdout is reserved for promotion (ragsweep-promote RUN_ID); "
            "pass eval.allow_holdout=true to evaluate the holdout split directly",
        )

    @property
    def max_k(self) -> int:
        return max(self.ks)


BACKGROUND_MODES = ("auto", "always", "never")
"""Values of ``tracking.background`` (:data:`ragsweep.tracking.background.BACKGROUND_RULES`)."""
RESIDENT_IDLE_SECONDS = 900
"""The default of ``tracking.resident_idle_seconds``: how long the resident logger waits
for a session before it exits (:mod:`ragsweep.tracking.resident`)."""


@dataclass(frozen=True)
class TrackingConfig:
    """Where MLflow runs go. ``uri`` null means MLFLOW_TRACKING_URI, else the local store.

    ``parent_run_id`` nests the run under a parent (sweeps set it for every job); ``tags``
    are added to the run (e.g. the swept axis and its value). ``timeout`` (seconds per
    request) and ``retries`` (retries per request) bound how long a tracking server that is
    down or hangs can hold a run up (docs/tracking.md). ``background``: when a single run
    (not ``-m``) hands its logging to a detached ``ragsweep-log`` process instead of waiting
    for MLflow: ``auto`` when its standard output is a terminal, ``always``, or ``never``
    (:mod:`ragsweep.tracking.background`); with ``auto`` or ``always``, the jobs of a sweep on
    the basic launcher hand their runs to the sweep's logger (same module). ``resident``:
    that logger (a sweep's, or a single run's that logs before it exits) is a session with
    one long-lived ``ragsweep-log --resident`` process that already has MLflow imported and
    a SQLite store open (:mod:`ragsweep.tracking.resident`), which exits after
    ``resident_idle_seconds`` without a session.
    """

    enabled: bool = not_hashed(True)
    uri: str | None = not_hashed(None)
    experiment: str = not_hashed("ragsweep")
    artifact_location: str | None = not_hashed(None)
    run_name: str | None = not_hashed(None)
    parent_run_id: str | None = not_hashed(None)
    tags: dict[str, str] = not_hashed(default_factory=dict)
    default_db: str = not_hashed("")
    default_artifacts: str = not_hashed("")
    timeout: int = not_hashed(10)
    retries: int = not_hashed(2)
    background: str = not_hashed("auto")
    resident: bool = not_hashed(False)
    resident_idle_seconds: int = not_hashed(RESIDENT_IDLE_SECONDS)

    def __post_init__(self) -> None:
        check_all(
            "tracking",
            self,
            [
                (self.timeout >= 1, "timeout", "a whole number of seconds >= 1"),
                (self.retries >= 0, "retries", ">= 0"),
                (self.resident_idle_seconds >= 1, "resident_idle_seconds", ">= 1"),
                (
                    self.background in BACKGROUND_MODES,
                    "background",
                    f"one of {', '.join(BACKGROUND_MODES)}",
                ),
            ],
        )
        _require(
            bool(self.experiment.strip()),
            f"tracking.experiment={self.experiment!r} must be a non-empty experiment name "
            "(default: ragsweep)",
        )


@dataclass(frozen=True)
class CacheConfig:
    """Stage caches keyed by config hashes (see docs/caching.md)."""

    enabled: bool = not_hashed(True)
    dir: str = not_hashed("")
    trust_mtime: bool = not_hashed(True)
    """Take a JSONL corpus file whose fingerprint (size, mtime, ctime, inode) is unchanged
    as unchanged, without reading it again (docs/caching.md, "The corpus fingerprint"),
    and a cache entry whose files keep the fingerprints they had when last hashed intact
    as intact, without hashing them again ("What is verified on read"); false reads and
    hashes both every run."""
