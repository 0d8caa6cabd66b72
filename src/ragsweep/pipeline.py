"""One evaluation run: corpus → chunks → index → metrics → artifacts → MLflow.

:func:`run_evaluation` is the plain function behind the ``ragsweep`` Hydra app; tests and
other tools (sweeps, promotion) call it directly. Each stage function receives only its own
sub-config. Everything that can be validated is validated before the first chunk is cut.
"""

from __future__ import annotations

import gc
import json
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from ragsweep import __version__
from ragsweep import tags as tag
from ragsweep.cache import StageCache
from ragsweep.chunking import CHUNKERS, Chunk
from ragsweep.config import RunConfig
from ragsweep.corpus import Corpus, load_corpus
from ragsweep.embedding import (
    BACKENDS,
    ModelIdentity,
)
from ragsweep.errors import ConfigError
from ragsweep.evaluate import (
    CaseResult,
    Summary,
    make_queries,
    retrieve,
    score_cases,
    summarize,
)
from ragsweep.golden import GoldenCase, GoldenSet, load_golden
from ragsweep.hashing import sha256_json, sha256_text
from ragsweep.index import Index, IndexProvenance, scope_masker
from ragsweep.indexing import (
    cached_chunks,
    cached_index,
    cached_rankings,
    cached_texts,
    chunks_key,
    index_key,
    is_sparse,
    texts_key,
)
from ragsweep.judge import JudgeConfig, JudgeOutcome, prepare_judge
from ragsweep.metrics import METRIC_DEFINITIONS
from ragsweep.preprocess import Preprocessor, build_preprocessor
from ragsweep.report import plot_at_k, print_summary, render_report
from ragsweep.tracking import DatasetInput, RunRecord, flatten, log_run
from ragsweep.tracking_store import prepare_store


@dataclass(frozen=True)
class RunResult:
    """What a run produced. ``objective`` is ``summary.overall[eval.objective]``."""

    config_hash: str
    summary: Summary
    cases: tuple[CaseResult, ...]
    objective: float
    output_dir: Path
    run_id: str | None
    timings: dict[str, float] = field(default_factory=dict)
    cache_metrics: dict[str, float] = field(default_factory=dict)
    cache_root: Path | None = None


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block.

    Scoring and writing a run's results builds a few hundred thousand small objects (one
    tuple per case and rank, JSON rows); each batch of allocations triggers collections
    that re-scan everything alive, which doubled the time of these steps. None of these
    objects form reference cycles, so reference counting frees them anyway.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass
class Timer:
    """Wall-clock seconds per named stage."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started


def validate_before_work(cfg: RunConfig) -> tuple[Preprocessor, ModelIdentity]:
    """Resolve every registry name and option so a typo fails before any work is done."""
    CHUNKERS.get(cfg.chunking.mode)
    backend = BACKENDS.get(cfg.embedding.backend)
    identity = backend.identity(cfg.embedding)
    preprocessor = build_preprocessor(cfg.preprocess)
    families = {
        "mrr",
        *(
            f"{m}_{k}"
            for m in ("hit_at", "recall_at", "ndcg_at", "coverage_at")
            for k in cfg.eval.ks
        ),
    }
    if cfg.eval.objective not in families:
        raise ConfigError(
            f"eval.objective={cfg.eval.objective!r} is not computed with eval.ks="
            f"{list(cfg.eval.ks)}; choose one of: {', '.join(sorted(families))}"
        )
    return preprocessor, identity


def config_hash(cfg: RunConfig, preprocessor: Preprocessor, model: ModelIdentity) -> str:
    """sha256 of every result-affecting config value. The embedding is represented by the
    backend's model identity (thread counts do not count, model versions do) and the
    preprocessing by the preprocessor's identity (its steps and the synonym file's content,
    not the file's path)."""
    return sha256_json(
        {**cfg.result_fields(), "preprocess": preprocessor.identity, "embedding": model}
    )


def select_cases(golden: GoldenSet, split: str) -> tuple[GoldenCase, ...]:
    """The cases of ``split``; at least one must be answerable, or nothing can be scored."""
    cases = golden.for_split(split)
    if not cases:
        raise ConfigError(f"golden set {golden.path} has no cases in split {split!r}")
    if not any(c.answerable for c in cases):
        raise ConfigError(
            f"golden set {golden.path} has no answerable cases in split {split!r}: "
            "retrieval metrics need at least one"
        )
    return cases


@dataclass(frozen=True)
class BuiltIndex:
    """A run's chunks, the index over their (preprocessed) text and that index's cache key
    (:func:`~ragsweep.indexing.index_key`)."""

    chunks: list[Chunk]
    index: Index
    key: str


def build_index(
    cfg: RunConfig,
    corpus: Corpus,
    preprocessor: Preprocessor,
    model: ModelIdentity,
    cache: StageCache,
    timer: Timer,
) -> BuiltIndex:
    """Chunk the corpus and build (or load from the cache) the index over the chunks."""
    chunk_set = chunks_key(corpus, cfg.chunking)
    with timer.stage("chunk_seconds"):
        chunks = cached_chunks(corpus, cfg.chunking, chunk_set, cache)
    if not chunks:
        raise ConfigError(f"chunking produced no chunks from {corpus.source}")
    provenance = IndexProvenance(
        model=model,
        preprocess=preprocessor.identity,
        chunking_key=chunk_set,
        corpus_hash=corpus.content_hash(),
        n_chunks=len(chunks),
    )
    with timer.stage("embed_seconds"):
        key = texts_key(chunk_set, cfg.chunking.heading_prefix, preprocessor)
        texts = cached_texts(chunks, key, cfg.chunking.heading_prefix, preprocessor, cache)
        built_key = index_key(key, model, is_sparse(cfg.embedding))
        index = cached_index(texts, built_key, cfg.embedding, provenance, cache)
    return BuiltIndex(chunks, index, built_key)


def evaluate_cases(
    cases: Sequence[GoldenCase],
    built: BuiltIndex,
    preprocessor: Preprocessor,
    cfg: RunConfig,
    cache: StageCache,
) -> tuple[CaseResult, ...]:
    """Retrieve for every case (within its scope when enforced) and score it. Rankings
    come from the cache when these queries already ran on this index."""
    mask = scope_masker([c.doc for c in built.chunks])
    queries = make_queries(
        cases, preprocessor, mask if cfg.retrieval.respect_scope else (lambda scope: None)
    )
    ranked = cached_rankings(
        built.index,
        built.key,
        queries,
        preprocessor.identity,
        cfg.top_k,
        lambda: retrieve(queries, built.index, preprocessor.identity, cfg.top_k),
        cache,
    )
    with gc_paused():
        return score_cases(cases, ranked, built.chunks, cfg.eval)


def run_evaluation(
    cfg: RunConfig,
    resolved_config: Mapping[str, Any],
    output_dir: Path,
    console: Console | None = None,
    extra_tags: Mapping[str, str] | None = None,
) -> RunResult:
    """Evaluate one configuration end to end and log it (see module docstring).

    ``resolved_config`` is the full resolved config as plain data: it is written to
    ``config.yaml`` and logged as params. ``output_dir`` receives every artifact.
    """
    console = console or Console(stderr=True)
    timer = Timer()
    preprocessor, model = validate_before_work(cfg)
    if cfg.tracking.enabled:
        prepare_store(cfg.tracking)  # the store answers before any work (docs/tracking.md)
    judge = prepare_judge(JudgeConfig.from_resolved(resolved_config))  # None: judge=off
    corpus = load_corpus(cfg.corpus)
    golden = load_golden(cfg.golden, corpus)
    cases = select_cases(golden, cfg.eval.split)

    cache = StageCache(Path(cfg.cache.dir) if cfg.cache.enabled else None)
    built = build_index(cfg, corpus, preprocessor, model, cache, timer)
    with timer.stage("eval_seconds"):
        results = evaluate_cases(cases, built, preprocessor, cfg, cache)
        summary = summarize(results)
    judged = None
    if judge is not None:
        with timer.stage("judge_seconds"):
            judged = judge.run(cases, results, built.chunks, cache)

    run_hash = config_hash(cfg, preprocessor, model)
    cache_metrics = cache.stats.as_metrics()  # every stage has run by now
    facts = run_facts(cfg, model, run_hash, len(built.chunks))
    output_dir.mkdir(parents=True, exist_ok=True)
    with gc_paused():
        write_artifacts(
            output_dir, resolved_config, results, built.chunks, summary, cfg.eval.ks, facts, judged
        )
    run_id = None
    if cfg.tracking.enabled:
        metrics = {
            **summary.flat_metrics(),
            **timer.seconds,
            **cache_metrics,
            **(judged.flat_metrics() if judged else {}),
            "n_chunks": float(len(built.chunks)),
        }
        tags = {
            **run_tags(cfg, corpus, golden, model, run_hash),
            **summary.key_tags(),
            **(judged.tags() if judged else {}),
            **cfg.tracking.tags,
            **dict(extra_tags or {}),
            **_parent_tag(cfg),
        }
        run_id = log_run(
            cfg.tracking, run_record(cfg, resolved_config, metrics, tags, output_dir, golden)
        )
    cache_line = cache.stats.describe() if cache.enabled else "disabled (cache.enabled=false)"
    print_summary(
        summary, cfg.eval.ks, {**facts, "cache": cache_line, "run": run_id or "not logged"}, console
    )
    if judged:
        judged.print_summary(console)
    return RunResult(
        config_hash=run_hash,
        summary=summary,
        cases=results,
        objective=summary.overall[cfg.eval.objective],
        output_dir=output_dir,
        run_id=run_id,
        timings=dict(timer.seconds),
        cache_metrics=cache_metrics,
        cache_root=cache.root,
    )


def run_facts(
    cfg: RunConfig, model: ModelIdentity, run_hash: str, n_chunks: int
) -> dict[str, object]:
    """The lines that identify a run in the terminal summary and in report.md."""
    c = cfg.chunking
    return {
        "config": run_hash[:12],
        "split": cfg.eval.split,
        "chunks": n_chunks,
        "model": model.describe(),
        "preprocess": "+".join(cfg.preprocess.steps) or "none",
        "chunking": f"{c.mode} size={c.size} overlap={c.overlap}",
    }


def run_record(
    cfg: RunConfig,
    resolved_config: Mapping[str, Any],
    metrics: dict[str, float],
    tags: dict[str, str],
    output_dir: Path,
    golden: GoldenSet,
) -> RunRecord:
    """What MLflow receives for one run (params are the flattened resolved config)."""
    return RunRecord(
        run_name=cfg.tracking.run_name or _default_run_name(cfg),
        params=flatten(resolved_config),
        metrics=metrics,
        tags=tags,
        artifacts_dir=output_dir,
        dataset=DatasetInput(
            path=golden.path,
            name=Path(golden.path).name,
            digest=golden.digest,
            context=cfg.eval.split,
        ),
    )


def _parent_tag(cfg: RunConfig) -> dict[str, str]:
    parent = cfg.tracking.parent_run_id
    return {tag.PARENT_RUN_ID: parent} if parent else {}


def _default_run_name(cfg: RunConfig) -> str:
    steps = "+".join(cfg.preprocess.steps) or "raw"
    c = cfg.chunking
    return f"{c.mode}-{c.size}-o{c.overlap}-{steps}-{cfg.embedding.backend}"


def run_tags(
    cfg: RunConfig, corpus: Corpus, golden: GoldenSet, model: ModelIdentity, config_hash: str
) -> dict[str, str]:
    return {
        tag.CONFIG_HASH: config_hash,
        tag.CORPUS_HASH: corpus.content_hash(),
        tag.GOLDEN_DIGEST: golden.digest,
        tag.SPLIT: cfg.eval.split,
        tag.MIN_SPAN_OVERLAP: repr(cfg.eval.min_span_overlap),
        tag.EMBEDDING_BACKEND: model.backend,
        tag.EMBEDDING_MODEL: model.name,
        tag.EMBEDDING_VERSION: model.version,
        tag.EMBEDDING_DIMENSION: str(model.dimension),
        tag.EMBEDDING_DIGEST: model.digest or "none",
        tag.VERSION: __version__,
        tag.GIT_COMMIT: git_commit(Path(cfg.paths.root_dir)),
    }


def git_commit(root: Path) -> str:
    """The project's git commit (with ``-dirty`` when the tree has changes), or ``unknown``."""
    try:
        commit = _git(root, "rev-parse", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit}-dirty" if dirty else commit


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
    )
    return done.stdout.strip()


def write_artifacts(
    output_dir: Path,
    resolved_config: Mapping[str, Any],
    results: Sequence[CaseResult],
    chunks: Sequence[Chunk],
    summary: Summary,
    ks: Sequence[int],
    facts: Mapping[str, object],
    judged: JudgeOutcome | None = None,
) -> None:
    """The run directory holds everything MLflow gets, so a run is inspectable without it.

    With ``judged``, each ``cases.jsonl`` row gets its ``judge`` record and ``report.md``
    a generation-and-judging section beside the retrieval metrics.
    """
    (output_dir / "config.yaml").write_text(
        yaml.safe_dump(dict(resolved_config), sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    extras = judged.case_fields() if judged else {}
    _write_jsonl(
        output_dir / "cases.jsonl", ({**r.to_json(), **extras.get(r.id, {})} for r in results)
    )
    _write_jsonl(output_dir / "chunks.jsonl", (_manifest_row(c) for c in chunks))
    report = render_report(summary, ks, "ragsweep evaluation report", facts)
    if judged:
        report += "\n" + judged.report_section()
    definitions = "\n".join(f"- `{k}`: {v}" for k, v in METRIC_DEFINITIONS.items())
    (output_dir / "report.md").write_text(
        report + "\n## Metric definitions\n\n" + definitions + "\n", encoding="utf-8"
    )
    if summary.overall:
        plot_at_k(summary, ks, output_dir / "metrics_at_k.svg")


def _manifest_row(chunk: Chunk) -> dict[str, Any]:
    return {
        "chunk_id": chunk.id,
        "doc": chunk.doc,
        "start": chunk.start,
        "end": chunk.end,
        "text_sha256": sha256_text(chunk.text),
        "heading_path": list(chunk.heading_path),
    }


_JSON_LINE = json.JSONEncoder(ensure_ascii=False)  # one encoder: json.dumps builds one per call


def _write_jsonl(path: Path, rows: Iterator[dict[str, Any]] | Any) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.writelines(_JSON_LINE.encode(row) + "\n" for row in rows)
