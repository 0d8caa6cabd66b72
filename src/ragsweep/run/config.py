"""The configuration of one run, complete, and its identity.

:class:`RunConfig` holds every config group as its typed dataclass, ``judge`` included, and
the resolved mapping it was built from (written to ``config.yaml``). :func:`resolve` is the
one call that validates a configuration and computes what identifies it: registry names
resolved, the embedding model's identity, the preprocessor's identity, the objective
measure, and :attr:`ResolvedConfig.config_hash`. The pipeline, promotion and the sweeper all
go through it. :func:`select_cases` checks the evaluated split against the golden set
(``ragsweep check`` and ``ragsweep embed`` call it too).

Which groups are hashed is read from field metadata (:func:`ragsweep.config.schema.not_hashed`):
``tracking``, ``paths`` and ``cache`` are bookkeeping; every other group is hashed with its
result-affecting fields, the embedding through its model identity and the preprocessing
through the preprocessor's identity (its steps and the synonym file's content).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ragsweep.chunk.chunkers import (
    CHUNKERS,
    NO_TOOLS,
    SEMANTIC,
    ChunkTools,
    chunking_identity,
)
from ragsweep.chunk.parents import PARENTS
from ragsweep.config.schema import (
    CacheConfig,
    ChunkingConfig,
    CorpusConfig,
    EmbeddingConfig,
    EvalConfig,
    GoldenConfig,
    PathsConfig,
    PreprocessConfig,
    RetrievalConfig,
    TrackingConfig,
    from_mapping,
    is_hashed,
    not_hashed,
    result_fields,
)
from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import sha256_json
from ragsweep.core.names import TOKENS
from ragsweep.data.preprocess import build_preprocessor
from ragsweep.eval import measures
from ragsweep.eval.budget import retrieval_depth
from ragsweep.index.backends import BACKENDS
from ragsweep.index.chunk_tokens import chunk_tokenizer
from ragsweep.index.rerank import RerankConfig, reranker_identity
from ragsweep.index.rerank import hash_part as rerank_hash_part
from ragsweep.index.semantic import semantic_identity
from ragsweep.judge.config import JudgeConfig

if typing.TYPE_CHECKING:
    from ragsweep.data.golden import GoldenCase, GoldenSet
    from ragsweep.data.preprocess import Preprocessor
    from ragsweep.eval.measures import Measure
    from ragsweep.index.encoding import ModelIdentity

SOURCE = "source"
OPTIONAL_GROUPS = ("judge", "rerank")
"""Groups a config may leave out: the stage is off."""


@dataclass(frozen=True)
class RunConfig:
    """The validated configuration of one evaluation run: one field per config group, and
    ``source``, the resolved plain mapping it was built from (for ``config.yaml`` and MLflow
    params; never read by a stage)."""

    corpus: CorpusConfig
    golden: GoldenConfig
    preprocess: PreprocessConfig
    chunking: ChunkingConfig
    embedding: EmbeddingConfig
    retrieval: RetrievalConfig
    eval: EvalConfig
    judge: JudgeConfig
    rerank: RerankConfig
    tracking: TrackingConfig = not_hashed()
    paths: PathsConfig = not_hashed()
    cache: CacheConfig = not_hashed()
    source: Mapping[str, Any] = not_hashed(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False
    )

    @classmethod
    def from_container(cls, data: Mapping[str, Any]) -> RunConfig:
        """Build from a resolved plain mapping (``OmegaConf.to_container(cfg, resolve=True)``).

        Every group must be present except ``judge`` and ``rerank`` (absent means off). Keys
        outside the groups (``hydra``, ``sweep``) belong to other components and are ignored.
        """
        hints = typing.get_type_hints(cls)
        kwargs: dict[str, Any] = {}
        for name in group_names():
            if name not in data and name not in OPTIONAL_GROUPS:
                raise ConfigError(f"config group '{name}' is missing")
            kwargs[name] = from_mapping(hints[name], data.get(name), name)
        return cls(**kwargs, source=MappingProxyType(dict(data)))

    def __post_init__(self) -> None:
        _ = self.top_k  # checks retrieval.top_k against eval.ks and eval.budgets

    @property
    def top_k(self) -> int:
        """Retrieval depth: ``retrieval.top_k`` or, when null, one deep enough for the largest
        eval cut-off and budget (:func:`ragsweep.eval.budget.retrieval_depth`, which raises a
        ConfigError for an explicit ``top_k`` below either)."""
        c = self.chunking
        return retrieval_depth(
            self.retrieval.top_k, self.eval.ks, self.eval.budgets, c.size, c.overlap
        )


def group_names() -> tuple[str, ...]:
    """Every config group of a run, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(RunConfig) if f.name != SOURCE)


def hashed_groups() -> tuple[str, ...]:
    """The groups that define a result (the allow-list the config hash is computed over)."""
    return tuple(f.name for f in dataclasses.fields(RunConfig) if f.name != SOURCE and is_hashed(f))


@dataclass(frozen=True)
class ResolvedConfig:
    """A run config with everything its identity depends on resolved (see module
    docstring). ``config_hash`` is the sha256 of every result-affecting value."""

    cfg: RunConfig
    preprocessor: Preprocessor
    model: ModelIdentity
    objective: Measure
    config_hash: str = field(default="")
    reranker: ModelIdentity | None = None
    chunk_tools: ChunkTools = NO_TOOLS
    """The tokenizer of ``chunking.unit=tokens`` (:mod:`ragsweep.index.chunk_tokens`)."""


def resolve(data: Mapping[str, Any] | RunConfig) -> ResolvedConfig:
    """Validate a run's configuration and compute its identity, before any work.

    Resolves every registry name (a typo fails here, with a suggestion), the embedding
    model's identity (a served model is asked for it), the preprocessor and the objective.
    """
    cfg = data if isinstance(data, RunConfig) else RunConfig.from_container(data)
    CHUNKERS.get(cfg.chunking.mode)
    refuse_ignored_chunking(cfg.chunking)
    PARENTS.get(cfg.retrieval.parent)
    sentences = semantic_identity(cfg.chunking, cfg.embedding)
    tools = ChunkTools(
        tokenizer=chunk_tokenizer(cfg.chunking, cfg.embedding),
        embedder=sentences.key if sentences else "",
    )
    model = BACKENDS.get(cfg.embedding.backend).identity(cfg.embedding)
    preprocessor = build_preprocessor(cfg.preprocess)
    objective = measures.require_objective(cfg.eval.objective, cfg.eval.ks, cfg.eval.budgets)
    cfg.rerank.check_depth(cfg.top_k)
    reranker = reranker_identity(cfg.rerank) if cfg.rerank.enabled else None
    resolved = ResolvedConfig(
        cfg, preprocessor, model, objective, reranker=reranker, chunk_tools=tools
    )
    return dataclasses.replace(resolved, config_hash=config_hash(resolved))


def refuse_ignored_chunking(chunking: ChunkingConfig) -> None:
    """ConfigError for a chunking option its mode or unit ignores, set off its default: it
    would change the config hash and not the results."""
    default = ChunkingConfig()
    if chunking.mode != SEMANTIC and chunking.breakpoint_percentile != (
        default.breakpoint_percentile
    ):
        raise ConfigError(
            f"chunking.breakpoint_percentile={chunking.breakpoint_percentile} is used only by "
            f"chunking.mode={SEMANTIC}, not {chunking.mode}: remove it (or set "
            f"chunking.mode={SEMANTIC})"
        )
    if chunking.unit != TOKENS and chunking.tokenizer != default.tokenizer:
        raise ConfigError(
            f"chunking.tokenizer={chunking.tokenizer} is used only with chunking.unit={TOKENS}, "
            f"not {chunking.unit}: remove it (or set chunking.unit={TOKENS})"
        )


def config_hash(resolved: ResolvedConfig) -> str:
    """sha256 of :func:`hashed_values`."""
    return sha256_json(hashed_values(resolved))


def hashed_values(resolved: ResolvedConfig) -> dict[str, Any]:
    """Every value the config hash covers, by group: the hashed groups' result-affecting
    fields, with the embedding replaced by the model identity (thread counts do not count,
    model versions do), the preprocessing by the preprocessor's identity (not the synonym
    file's path), a disabled judge by ``{"enabled": false}`` (its other settings change
    nothing then), and an enabled reranker by its model identity and fields; a disabled
    reranker is left out, so runs without one hash as they did before the stage existed."""
    cfg = resolved.cfg
    stand_ins: dict[str, Any] = {
        "embedding": resolved.model,
        "preprocess": resolved.preprocessor.identity,
        "judge": cfg.judge.identity() if cfg.judge.enabled else {"enabled": False},
        "rerank": rerank_hash_part(cfg.rerank, resolved.reranker) if resolved.reranker else None,
    }
    tools = resolved.chunk_tools
    if tools.tokenizer is not None or tools.embedder:  # the tokenizer, the sentence model
        tokenizer = {"tokenizer_sha256": tools.tokenizer.sha256} if tools.tokenizer else {}
        embedder = {"sentence_model": tools.embedder} if tools.embedder else {}
        stand_ins["chunking"] = {**chunking_identity(cfg.chunking), **tokenizer, **embedder}
    return {
        name: stand_ins[name] if name in stand_ins else result_fields(getattr(cfg, name))
        for name in hashed_groups()
        if not (name in stand_ins and stand_ins[name] is None)
    }


def select_cases(golden: GoldenSet, split: str) -> tuple[GoldenCase, ...]:
    """The cases of ``split``; at least one must be answerable, or nothing can be scored."""
    cases = golden.for_split(split)
    if not cases:
        raise ConfigError(f"golden set {golden.path} has no cases in split {split!r}")
    if not any(c.scored for c in cases):
        raise ConfigError(
            f"golden set {golden.path} has no answerable cases in split {split!r}: "
            "retrieval metrics need at least one"
        )
    return cases
