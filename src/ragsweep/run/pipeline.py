"""One evaluation run: corpus → chunks → index → rankings → metrics (→ judge), then the run
directory and the MLflow record.

:func:`run_stages` does the work and returns a typed :class:`StageOutcome`; it knows
nothing of tracking or files. :func:`run_evaluation` is the plain function behind the
``ragsweep`` Hydra app (tests, sweeps and promotion call it directly): it runs the stages,
writes the run directory (:mod:`ragsweep.run.files`), logs the run
(:mod:`ragsweep.run.record`, :mod:`ragsweep.tracking.log`) and prints the summary. Everything
that can be validated is validated by :func:`ragsweep.run.config.resolve` before the first
chunk is cut.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

import numpy as np
from rich.console import Console

from ragsweep.cache.stage import StageCache
from ragsweep.chunk.chunkers import Chunk
from ragsweep.chunk.table import ChunkTable, rows_of
from ragsweep.config.schema import EmbeddingConfig
from ragsweep.core import tags as tag
from ragsweep.core.atomic import run_dir_errors
from ragsweep.core.errors import ConfigError
from ragsweep.core.gcpause import gc_paused
from ragsweep.core.hashing import sha256_json
from ragsweep.core.names import TABLE_FILE
from ragsweep.data.corpus import Corpus
from ragsweep.data.corpus_cache import open_corpus
from ragsweep.data.golden import GoldenCase, GoldenSet, load_golden
from ragsweep.eval.metric_keys import N_CHUNKS
from ragsweep.eval.scoring import (
    CaseResult,
    Summary,
    make_queries,
    retrieve,
    score_cases,
    summarize,
)
from ragsweep.index.acl import AccessFilter
from ragsweep.index.backends import BACKENDS, Backend
from ragsweep.index.base import (
    Index,
    IndexProvenance,
    Query,
    Ranked,
    ScopeMask,
    scope_masker,
    scope_masker_from_codes,
)
from ragsweep.index.latency import stage_latency
from ragsweep.index.rerank import Reranker
from ragsweep.index.semantic import sentence_model_line, with_sentence_embedder
from ragsweep.index.small_to_big import parent_line, parent_rankings, parents_set, uses_parents
from ragsweep.index.stages import (
    cached_chunks,
    cached_rankings,
    cached_texts,
    chunks_key,
    document_titles,
    index_key,
    rankings_key,
    scope_key,
    texts_key,
)
from ragsweep.judge import JudgeOutcome, prepare_judge
from ragsweep.run.config import ResolvedConfig, select_cases
from ragsweep.run.contracts import check_retrieved
from ragsweep.run.describe import CHUNKING, STEPS, describe
from ragsweep.run.files import RunCases, StoredCases, StoredLines, write_artifacts
from ragsweep.run.inputs import check_sweep_inputs
from ragsweep.run.metrics import (
    ARTIFACTS_SECONDS,
    CHUNK_SECONDS,
    EMBED_SECONDS,
    EVAL_SECONDS,
    JUDGE_SECONDS,
    LOAD_SECONDS,
    LOG_SECONDS,
    STORE_SECONDS,
)
from ragsweep.run.names import RunOrigin
from ragsweep.run.record import run_record, run_tags
from ragsweep.run.report import print_summary
from ragsweep.run.scored import cached_scores, golden_inputs, scores_key
from ragsweep.run.timer import Timer
from ragsweep.tracking.background import (
    SweepLogger,
    early_logger,
    left_to,
    log_run_in_background,
    log_through,
    wants_background,
)
from ragsweep.tracking.background import active as active_sweep_logger
from ragsweep.tracking.log import RunRecord, log_run, save_record
from ragsweep.tracking.store import prepare_store
from ragsweep.tracking.tables import logged_tables_tag


@dataclass(frozen=True)
class RunResult:
    """What a run produced. ``objective`` is ``summary.overall[eval.objective]``;
    ``timings`` holds the wall seconds of each stage (the logged ``*_seconds`` metrics) and,
    when the run was logged, ``log_seconds``: the time logging it took."""

    config_hash: str
    summary: Summary
    cases: tuple[CaseResult, ...]
    objective: float
    output_dir: Path
    run_id: str | None
    timings: dict[str, float] = field(default_factory=dict)
    cache_metrics: dict[str, float] = field(default_factory=dict)
    cache_root: Path | None = None


class BuiltIndex:
    """A run's chunks, the index over their (preprocessed) text and that index's cache key
    (:func:`~ragsweep.index.stages.index_key`); ``texts`` are the indexed texts (a reranker reads
    them); ``backend`` is the registered backend that built it (its search code is part of
    the rankings key); ``chunk_set`` is the key of the chunks themselves (their content:
    :func:`~ragsweep.index.stages.chunks_key`, or a backend's own chunks' spans).

    ``texts`` and ``index`` are read from the cache (or built) on first use: a warm run
    whose rankings are cached needs neither, and reading them grows with the corpus.
    """

    def __init__(
        self,
        chunks: Sequence[Chunk],
        key: str,
        backend: Backend,
        texts: Callable[[], list[str]],
        index: Callable[[Sequence[str]], Index],
        chunk_set: str,
    ) -> None:
        self.chunks = chunks
        self.key = key
        self.chunk_set = chunk_set
        self.backend = backend
        self._load_texts = texts
        self._load_index = index

    @functools.cached_property
    def texts(self) -> list[str]:
        return self._load_texts()

    @functools.cached_property
    def index(self) -> Index:
        return self._load_index(LazyTexts(lambda: self.texts))


class LazyTexts(Sequence[str]):
    """The indexed texts, read on first use: a backend loading a cached index never does."""

    def __init__(self, load: Callable[[], list[str]]) -> None:
        self._load = load

    @functools.cached_property
    def _texts(self) -> list[str]:
        return self._load()

    def __len__(self) -> int:
        return len(self._texts)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        return self._texts[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)


def build_index(
    resolved: ResolvedConfig, corpus: Corpus, cache: StageCache, timer: Timer
) -> BuiltIndex:
    """Chunk the corpus; the index over the chunks is built (or loaded from the cache) when
    first used (see :class:`BuiltIndex`), its time counted in ``embed_seconds``."""
    cfg, preprocessor, model = resolved.cfg, resolved.preprocessor, resolved.model
    backend = BACKENDS.get(cfg.embedding.backend)
    with timer.stage(CHUNK_SECONDS):
        chunks, chunk_set = _chunks(backend, resolved, corpus, cache)
    if not chunks:
        raise ConfigError(f"chunking produced no chunks from {corpus.source}")
    provenance = IndexProvenance(
        model=model,
        preprocess=preprocessor.identity,
        chunking_key=chunk_set,
        corpus_hash=corpus.content_hash(),
        n_chunks=len(chunks),
    )
    key = texts_key(chunk_set, cfg.chunking, preprocessor)
    built_key = index_key(key, model, backend)

    def texts() -> list[str]:
        with timer.stage(EMBED_SECONDS):
            titles = document_titles(corpus, cfg.chunking)
            heading_prefix = cfg.chunking.heading_prefix
            return cached_texts(chunks, key, heading_prefix, preprocessor, cache, titles)

    def index(lazy_texts: Sequence[str]) -> Index:
        with timer.stage(EMBED_SECONDS):
            return backend.cached_index(lazy_texts, built_key, cfg.embedding, provenance, cache)

    return BuiltIndex(chunks, built_key, backend, texts, index, chunk_set)


def _chunks(
    backend: Backend, resolved: ResolvedConfig, corpus: Corpus, cache: StageCache
) -> tuple[Sequence[Chunk], str]:
    """The run's chunks and their key: cut by ``chunking``, or, for a backend that brings
    its own (``external``), that backend's, keyed by their spans."""
    cfg = resolved.cfg
    own = getattr(backend, "own_chunks", None)
    if own is None:
        tools = with_sentence_embedder(resolved.chunk_tools, cfg.chunking, cfg.embedding, cache)
        key = chunks_key(corpus, cfg.chunking, tools)
        return cached_chunks(corpus, cfg.chunking, key, cache, tools), key
    chunks = own(cfg.embedding, corpus)
    spans = [[c.id, c.doc, c.start, c.end] for c in chunks]
    return chunks, sha256_json({"corpus": corpus.content_hash(), "own_chunks": spans})


def chunk_scope_masker(chunks: Sequence[Chunk]) -> ScopeMask:
    """:func:`~ragsweep.index.base.scope_masker` of ``chunks``, from a chunk table's document
    codes without building its chunks."""
    if isinstance(chunks, ChunkTable):
        return scope_masker_from_codes(chunks.doc_codes(), chunks.doc_positions())
    return scope_masker([c.doc for c in chunks])


def retrieved_chunks(chunks: Sequence[Chunk], ranked: Sequence[Ranked]) -> Sequence[Chunk]:
    """The chunks of ``chunks`` some ranking holds, in index order, built from their rows
    only (of a chunk table each when first read, :class:`~ragsweep.chunk.views.ChunkRows`):
    at most ``len(ranked)`` × the retrieval depth, however large the corpus."""
    rows = np.unique(np.concatenate([r.indices for r in ranked] or [np.empty(0, np.int64)]))
    return rows_of(chunks, rows.astype(np.int64))


def resolved_positions(built: BuiltIndex) -> Mapping[str, int]:
    """Document id → corpus position of the run's chunk table (what :func:`scope_key`
    keys scopes by); by first appearance among the chunks for another chunk list."""
    if isinstance(built.chunks, ChunkTable):
        return built.chunks.doc_positions()
    positions: dict[str, int] = {}
    for chunk in built.chunks:
        positions.setdefault(chunk.doc, len(positions))
    return positions


def complete_chunking(built: BuiltIndex, embedding: EmbeddingConfig) -> bool:
    """Whether the run's chunks are its complete chunking: a backend bringing its own
    chunks says so (``complete_chunks``); chunks cut by ``chunking`` always are."""
    complete = getattr(built.backend, "complete_chunks", None)
    return True if complete is None else bool(complete(embedding))


@dataclass(frozen=True)
class Scored:
    """A run's scored cases (``results[i]`` is the i-th case's), their summary (with the
    per-stage latency percentiles, :func:`~ragsweep.index.latency.stage_latency`, and what
    an index measures of its own rankings: the ``ann`` recall against exact search), the
    retrieved chunks (:func:`retrieved_chunks`) and the key of the scored result
    (:func:`~ragsweep.run.scored.scores_key`: the case files are cached under it)."""

    results: tuple[CaseResult, ...]
    summary: Summary
    retrieved: Sequence[Chunk]
    key: str


def evaluate_cases(
    cases: Sequence[GoldenCase],
    built: BuiltIndex,
    resolved: ResolvedConfig,
    cache: StageCache,
    corpus: Corpus,
    inputs: Mapping[str, Any],
) -> Scored:
    """Retrieve for every case (within its scope when enforced), score it and summarize.
    Rankings come from the cache when these queries already ran on this index, and the
    scored result when these rankings were scored with the same ``inputs`` (golden cases,
    golden set and corpus: :func:`~ragsweep.run.scored.golden_inputs`) and settings
    (:mod:`ragsweep.run.scored`). ``corpus``: whose access metadata filters and counts,
    and whose ids the rankings are checked against (:mod:`ragsweep.run.contracts`). With
    ``retrieval.parent``, the ranked chunks' parents (from ``corpus``) are what is scored
    and returned (:mod:`ragsweep.index.small_to_big`)."""
    cfg, preprocessor, access = resolved.cfg, resolved.preprocessor, corpus.access
    respect = cfg.retrieval.respect_scope
    texts_only = make_queries(cases, preprocessor, lambda scope: None)
    positions = resolved_positions(built) if respect else {}
    masker = functools.cache(lambda: chunk_scope_masker(built.chunks))
    flt = AccessFilter(access, cfg.retrieval, lambda docs: masker()(docs), len(built.chunks))
    scopes = [flt.scope_key(scope_key(c.scope, positions) if respect else None, c) for c in cases]

    @functools.cache
    def queries() -> list[Query]:  # with their scope masks: only a search needs them
        if not respect:
            return texts_only
        return make_queries(cases, preprocessor, masker())

    depth = cfg.rerank.depth(cfg.top_k)  # a reranker rescores more than the run keeps
    ranked = cached_rankings(
        lambda: built.index,
        rankings_key(built.key, texts_only, cfg.retrieval, depth, built.backend, scopes),
        texts_only,
        preprocessor.identity,
        depth,
        lambda index: flt.search(
            lambda qs, at: retrieve(qs, index, preprocessor.identity, at), queries(), cases, depth
        ),
        cache,
        built.chunks,
    )
    index_metrics = {}  # e.g. ann: recall against exact search (it opens the index)
    if getattr(built.backend, "measures_rankings", False):
        measuring: Any = built.index  # such a backend's index has run_metrics
        index_metrics = measuring.run_metrics(queries(), ranked)
    if resolved.reranker is not None:
        reranker = Reranker(cfg.rerank, resolved.reranker, cache)
        ranked = reranker.rerank(ranked, texts_only, built.texts, cfg.top_k)
    chunks, chunk_set = built.chunks, built.chunk_set
    if uses_parents(cfg.retrieval):
        chunks, ranked = parent_rankings(ranked, built.chunks, corpus, cfg.retrieval)
        chunk_set = parents_set(built.chunk_set, cfg.retrieval)
    # parents are not the run's chunking: traces then leave the chunk that hits unknown
    complete = complete_chunking(built, cfg.embedding) and not uses_parents(cfg.retrieval)

    def score() -> tuple[tuple[CaseResult, ...], Summary]:
        with gc_paused():
            results = score_cases(cases, ranked, chunks, cfg.eval, access, complete)
        return results, summarize(results, cfg.eval, cfg.top_k)

    key = scores_key(ranked, chunk_set, inputs, cfg.eval, cfg.top_k, complete)
    with gc_paused():  # a hit decodes thousands of results: no cycles, collections re-scan
        results, summary = cached_scores(cache, key, cases, score)
    check_retrieved(results, cases, corpus, flt, cfg.embedding.backend)
    summary = replace(summary, extra={**summary.extra, **stage_latency(ranked), **index_metrics})
    return Scored(results, summary, retrieved_chunks(chunks, ranked), key)


@dataclass(frozen=True)
class StageOutcome:
    """Everything the stages of one run produced, before anything is written or logged."""

    corpus: Corpus
    golden: GoldenSet
    cases: tuple[GoldenCase, ...]
    """The golden cases of the evaluated split; ``results[i]`` is ``cases[i]``'s."""
    built: BuiltIndex
    results: tuple[CaseResult, ...]
    retrieved: Sequence[Chunk]
    """The chunks some case retrieved, in index order (what the files and the judge read)."""
    summary: Summary
    judged: JudgeOutcome | None
    timer: Timer
    cache: StageCache
    scores_key: str
    """The key of the scored result (:func:`~ragsweep.run.scored.scores_key`)."""


def run_stages(resolved: ResolvedConfig, background: bool = False) -> StageOutcome:
    """Run every stage of one configuration (see module docstring). ``background``: the
    run will be logged by a logger process, on a store already found ready
    (:func:`ragsweep.tracking.background.wants_background`,
    :func:`~ragsweep.tracking.background.left_to`), so MLflow is not opened here."""
    cfg = resolved.cfg
    timer = Timer()
    judge = prepare_judge(cfg.judge)  # None: judge=off; checks the server before any work
    cache_dir = Path(cfg.cache.dir) if cfg.cache.enabled else None
    cache = StageCache(cache_dir, trust_fingerprints=cfg.cache.trust_mtime)
    with timer.stage(LOAD_SECONDS):
        corpus = open_corpus(cfg.corpus, cache, cfg.cache.trust_mtime)
        golden = load_golden(cfg.golden, corpus)
        check_sweep_inputs(cfg.tracking.tags, golden, corpus, cfg.corpus)
    cases = select_cases(golden, cfg.eval.split)
    if judge is not None:
        judge.check_cases(cases)  # fixed answers cover every case, before any work
    if cfg.tracking.enabled and not background:  # inputs are valid: the store must answer
        with timer.stage(STORE_SECONDS):
            prepare_store(cfg.tracking)  # (docs/tracking.md, "What happens when")
    built = build_index(resolved, corpus, cache, timer)
    inputs = golden_inputs(cases, golden.digest, cfg.golden, corpus.content_hash())
    with timer.stage(EVAL_SECONDS):
        scored = evaluate_cases(cases, built, resolved, cache, corpus, inputs)
    results, summary, retrieved = scored.results, scored.summary, scored.retrieved
    judged = None
    if judge is not None:
        with timer.stage(JUDGE_SECONDS):
            judged = judge.run(cases, results, retrieved, cache)
    return StageOutcome(
        corpus, golden, cases, built, results, retrieved, summary, judged, timer, cache, scored.key
    )


def run_evaluation(
    resolved: ResolvedConfig,
    output_dir: Path,
    console: Console | None = None,
    extra_tags: Mapping[str, str] | None = None,
    origin: RunOrigin | None = None,
    show_summary: bool = True,
) -> RunResult:
    """Evaluate one configuration end to end: stages, run directory, MLflow, summary.

    ``output_dir`` receives every artifact; ``extra_tags`` are added to the MLflow run
    (after ``tracking.tags``); ``origin`` (how the run was launched) names it;
    ``show_summary``: print the terminal summary (a sweep's job prints one line instead,
    :func:`ragsweep.run.report.job_line`; ``report.md`` holds the summary either way).
    """
    console = console or Console(stderr=True)
    cfg = resolved.cfg
    single = origin is not None and not origin.multirun
    background = single and wants_background(cfg.tracking, multirun=False)
    logger = early_logger(cfg.tracking, output_dir) if single and not background else None
    try:
        how = (origin, show_summary, background, logger)
        return _evaluated(resolved, output_dir, console, extra_tags, *how)
    finally:
        if logger is not None:
            logger.abandon()  # refused or failed before its record: nothing to log


def _evaluated(
    resolved: ResolvedConfig,
    output_dir: Path,
    console: Console,
    extra_tags: Mapping[str, str] | None,
    origin: RunOrigin | None,
    show_summary: bool,
    background: bool,
    logger: SweepLogger | None,
) -> RunResult:
    """:func:`run_evaluation`; ``background``: logged by a detached logger, ``logger``: by
    the logger started for this run (:func:`ragsweep.tracking.background.early_logger`)."""
    cfg = resolved.cfg
    to_logger = origin is not None and origin.multirun and cfg.tracking.background != "never"
    sweep_logger = active_sweep_logger() if to_logger else None
    left = background or logger is not None or left_to(sweep_logger, cfg.tracking)
    done = run_stages(resolved, left)
    cache_metrics = done.cache.stats.as_metrics()  # every stage has run by now
    facts = run_facts(resolved, len(done.built.chunks))
    with done.timer.stage(ARTIFACTS_SECONDS), gc_paused(), run_dir_errors(output_dir):
        write_artifacts(
            output_dir,
            cfg.source,
            RunCases(
                done.cases,
                done.results,
                done.retrieved,
                done.corpus,
                StoredLines(done.cache, done.built.chunk_set),
                StoredCases(done.cache, done.scores_key),
            ),
            done.summary,
            cfg.eval,
            facts,
            done.judged,
        )
    run_id = None
    record = None
    timings = dict(done.timer.seconds)  # what the record logs; logging's own time is added
    handed_to: str | None = None  # who logs the run, when not this function
    if cfg.tracking.enabled:
        started = time.perf_counter()
        record = _record(resolved, done, cache_metrics, extra_tags, output_dir, origin)
        if sweep_logger is not None:
            save_record(cfg.tracking, record)
            sweep_logger.submit(record.artifacts_dir)
            handed_to = "being logged by the sweep's logger"
        elif background:
            handed_to = "being logged in the background"
        elif logger is not None:
            run_id = log_through(logger, cfg.tracking, record)
        else:
            run_id = log_run(cfg.tracking, record)
        timings[LOG_SECONDS] = time.perf_counter() - started
    cache = done.cache
    cache_line = cache.stats.describe() if cache.enabled else "disabled (cache.enabled=false)"
    facts = {**facts, "cache": cache_line, "run": run_id or handed_to or "not logged"}
    if show_summary:
        print_summary(done.summary, cfg.eval, facts, console)
        if done.judged:
            done.judged.print_summary(console)
    if record is not None and background:  # last, so the logger does not slow the summary
        started = time.perf_counter()
        handed_over = log_run_in_background(cfg.tracking, record)
        timings[LOG_SECONDS] = time.perf_counter() - started
        console.print(handed_over.describe(), soft_wrap=True, highlight=False)
    return RunResult(
        config_hash=resolved.config_hash,
        summary=done.summary,
        cases=done.results,
        objective=done.summary.overall[resolved.objective.name],
        output_dir=output_dir,
        run_id=run_id,
        timings=timings,
        cache_metrics=cache_metrics,
        cache_root=cache.root,
    )


def _record(
    resolved: ResolvedConfig,
    done: StageOutcome,
    cache_metrics: dict[str, float],
    extra_tags: Mapping[str, str] | None,
    output_dir: Path,
    origin: RunOrigin | None,
) -> RunRecord:
    """The MLflow record: summary, timings, cache and judge figures; identity, judge,
    configured and extra tags."""
    judged = done.judged
    metrics = {
        **done.summary.flat_metrics(),
        **done.timer.seconds,
        **cache_metrics,
        **(judged.flat_metrics() if judged else {}),
        N_CHUNKS: float(len(done.built.chunks)),
    }
    tags = {
        **run_tags(resolved, done.corpus, done.golden),
        **done.summary.key_tags(),
        tag.LOGGED_ARTIFACTS: logged_tables_tag([TABLE_FILE]),  # the UI shows it as a table
        **(judged.tags() if judged else {}),
        **resolved.cfg.tracking.tags,
        **dict(extra_tags or {}),
    }
    return run_record(resolved, metrics, tags, output_dir, done.golden, done.summary, origin)


def run_facts(resolved: ResolvedConfig, n_chunks: int) -> dict[str, object]:
    """The lines that identify a run in the terminal summary and in report.md."""
    cfg, model = resolved.cfg, resolved.model
    return {
        "config": resolved.config_hash[:12],
        "split": cfg.eval.split,
        "corpus": cfg.corpus.path,
        "golden": cfg.golden.path,
        "chunks": n_chunks,
        "model": model.describe(),
        "preprocess": describe(cfg, STEPS),
        "chunking": describe(cfg, CHUNKING),
        "top_k": cfg.top_k,
        **({"parent": parent_line(cfg.retrieval)} if uses_parents(cfg.retrieval) else {}),
        **({"tokens": tokenizer.label} if (tokenizer := resolved.chunk_tools.tokenizer) else {}),
        **(
            {"sentences": line}
            if (line := sentence_model_line(cfg.chunking, cfg.embedding))
            else {}
        ),
        **(
            {"rerank": f"{resolved.reranker.describe()}, top {cfg.rerank.candidates}"}
            if resolved.reranker
            else {}
        ),
    }
