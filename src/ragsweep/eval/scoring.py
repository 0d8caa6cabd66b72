"""Score retrieval on golden cases: per-case metrics, then averaging and slicing.

Answerable cases get retrieval metrics (see docs/metrics.md). Unanswerable cases get none:
they are counted, and their top-1 retrieval score is reported beside the answerable cases'
so a no-answer threshold can be chosen; they never count as perfect (or zero) recall.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain, islice
from typing import Any, NamedTuple

import numpy as np

from ragsweep.chunk.chunkers import Chunk
from ragsweep.chunk.table import chunk_columns
from ragsweep.chunk.views import ChunkColumns
from ragsweep.config.schema import EvalConfig
from ragsweep.core.names import ORIGIN_HAND
from ragsweep.core.progress import progress_bar
from ragsweep.data.access import Access
from ragsweep.data.corpus import jsonl_lines
from ragsweep.data.golden import GoldenCase
from ragsweep.data.preprocess import Preprocessor
from ragsweep.eval.access import case_access, summarize_access
from ragsweep.eval.measures import RAN_OUT, Measure
from ragsweep.eval.metric_keys import BY_ORIGIN, N_ANSWERABLE, key_tags, type_segments
from ragsweep.eval.metrics import evidence_union, mean_by_key, metrics_per_case
from ragsweep.eval.relevance import Interval, IntervalBatch, codes_of
from ragsweep.eval.trace import (
    ChunkIntervals,
    SpanTrace,
    span_traces,
    traces_from_json,
    traces_to_json,
)
from ragsweep.eval.uncertainty import Bootstrap, Bounds, interval_keys, stratified_intervals
from ragsweep.index.base import Index, Query, Ranked

SEARCH_BATCH = 256


class RetrievedChunk(NamedTuple):
    """One retrieved chunk of a case, with its source span and score.

    A named tuple rather than a dataclass: a run creates one per case and rank (tens of
    thousands), and tuples are much cheaper to build.
    """

    chunk_id: str
    doc: str
    start: int
    end: int
    score: float


@dataclass(frozen=True)
class CaseResult:
    """Outcome of one golden case. ``metrics`` is None for unanswerable cases; ``spans``
    holds where each evidence span went (:mod:`ragsweep.eval.trace`), None for unanswerable
    cases and in rows written before it was recorded; ``origin`` is the case's (``hand``,
    or ``drafted`` for an accepted draft: docs/golden.md)."""

    id: str
    type: str
    split: str
    answerable: bool
    metrics: dict[str, float] | None
    retrieved: tuple[RetrievedChunk, ...]
    seconds: float
    spans: tuple[SpanTrace, ...] | None = None
    access: dict[str, float] | None = None
    """The access counts (:mod:`ragsweep.eval.access`); None for a corpus without access
    metadata."""
    origin: str = ORIGIN_HAND

    def to_json(self) -> dict[str, Any]:
        """The ``cases.jsonl`` row. ``retrieved`` is stored by column (rank 1 first), e.g.
        ``{"chunk_id": [...], "doc": [...], "start": [...], "end": [...], "score": [...]}``:
        a row of ten ``{"chunk_id": ..., "score": ...}`` objects per case took longer to
        encode than scoring the run, and doubled the file's size."""
        columns = (
            zip(*self.retrieved, strict=True)
            if self.retrieved
            else ((),) * len(RetrievedChunk._fields)
        )
        row: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "split": self.split,
            "answerable": self.answerable,
            "origin": self.origin,
            "metrics": self.metrics,
            "latency_ms": round(self.seconds * 1000, 3),
            "retrieved": dict(zip(RetrievedChunk._fields, columns, strict=True)),
            **({"access": self.access} if self.access is not None else {}),
        }
        if self.spans is not None:
            row["spans"] = traces_to_json(self.spans)
        return row

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> CaseResult:
        """Inverse of :meth:`to_json` (one ``cases.jsonl`` line; latency there is in ms)."""
        return cls(
            id=row["id"],
            type=row["type"],
            split=row["split"],
            answerable=row["answerable"],
            metrics=row["metrics"],
            retrieved=_retrieved_from_json(row["retrieved"]),
            seconds=row["latency_ms"] / 1000,
            spans=traces_from_json(row.get("spans")),
            access=row.get("access"),
            origin=row.get("origin", ORIGIN_HAND),  # cases.jsonl written before origins
        )


def _retrieved_from_json(value: Any) -> tuple[RetrievedChunk, ...]:
    if isinstance(value, Mapping):
        columns = (value[name] for name in RetrievedChunk._fields)
        return tuple(RetrievedChunk(*row) for row in zip(*columns, strict=True))
    # cases.jsonl written before ragsweep stored ``retrieved`` by column: a list of objects
    return tuple(RetrievedChunk(**chunk) for chunk in value)


def cases_from_jsonl(text: str, source: str) -> tuple[CaseResult, ...]:
    """The case results of a ``cases.jsonl`` text, in file order; a line that is not a case
    result is a ValueError naming ``source`` (where the text came from) and the line."""
    cases = []
    for number, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        try:
            cases.append(CaseResult.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{source}, line {number}: not a case result ({exc!r})") from exc
    return tuple(cases)


def make_queries(
    cases: Sequence[GoldenCase],
    preprocessor: Preprocessor,
    scope_mask: Callable[[Sequence[str] | None], np.ndarray | None],
) -> list[Query]:
    """Each case's preprocessed question, the chunk mask of its scope (None: all) and its
    id."""
    return [Query(preprocessor(c.question), scope_mask(c.scope), c.id) for c in cases]


def retrieve(
    queries: Sequence[Query], index: Index, query_preprocess: Mapping[str, Any], top_k: int
) -> list[Ranked]:
    """Run every query through ``index`` (``query_preprocess``: the identity of the
    preprocessing the queries went through, checked against the index's provenance)."""
    ranked: list[Ranked] = []
    with progress_bar("searching", len(queries)) as advance:
        for begin in range(0, len(queries), SEARCH_BATCH):
            batch = queries[begin : begin + SEARCH_BATCH]
            ranked.extend(index.search(batch, top_k, query_preprocess))
            advance(len(batch))
    return ranked


def score_cases(
    cases: Sequence[GoldenCase],
    ranked: Sequence[Ranked],
    chunks: Sequence[Chunk],
    cfg: EvalConfig,
    access: Mapping[str, Access] | None = None,
    complete: bool = True,
) -> tuple[CaseResult, ...]:
    """One result per case, in order: its retrieved chunks and, for answerable cases, its
    metrics (None for unanswerable cases); with the corpus's ``access`` metadata, its access
    counts. ``ranked[i]`` is the ranking of ``cases[i]`` and holds indices into ``chunks``;
    ``complete``: ``chunks`` are the run's complete chunking (else span traces leave the
    chunk that hits a span unknown)."""
    if len(ranked) != len(cases):
        raise ValueError(f"{len(ranked)} rankings for {len(cases)} cases")
    used, ranked = _retrieved_only(ranked)
    picked = chunk_columns(chunks, used.tolist())  # a chunk table builds no chunk for it
    metrics, traces = _answerable_metrics(cases, ranked, picked, chunks if complete else None, cfg)
    retrieved = _retrieved(ranked, picked)
    rows = [[(c.doc, c.start, c.end) for c in r] for r in retrieved] if access else []
    counts = case_access(cases, rows, access or {}, cfg.budgets)
    return tuple(
        CaseResult(
            id=case.id,
            type=case.type,
            split=case.split,
            answerable=case.scored,
            metrics=metrics.get(i),
            retrieved=retrieved[i],
            seconds=ranking.seconds,
            spans=traces.get(i),
            access=counts[i],
            origin=case.origin,
        )
        for i, (case, ranking) in enumerate(zip(cases, ranked, strict=True))
    )


def _retrieved_only(ranked: Sequence[Ranked]) -> tuple[np.ndarray, list[Ranked]]:
    """The sorted distinct chunk indices of all rankings, and the rankings with their
    indices into that array. Scoring then touches only the chunks some case retrieved, so
    its cost follows the number of cases, not the size of the index."""
    used = np.unique(np.concatenate([r.indices for r in ranked] or [np.empty(0, np.int64)]))
    local = [replace(r, indices=np.searchsorted(used, r.indices)) for r in ranked]
    return used.astype(np.int64), local


def _retrieved(ranked: Sequence[Ranked], picked: ChunkColumns) -> list[tuple[RetrievedChunk, ...]]:
    """Each ranking's chunks (indices into ``picked``) with their scores rounded to 6
    places, converted in one pass over all rankings: per-ranking numpy calls would cost
    more than the scoring."""
    ids, docs, starts, ends = picked.ids, picked.docs, picked.starts, picked.ends
    lengths = [len(r.indices) for r in ranked]
    flat_indices = np.concatenate([r.indices for r in ranked] or [np.empty(0, np.int64)])
    flat_scores = np.concatenate([r.scores for r in ranked] or [np.empty(0)])
    pairs = iter(
        zip(
            flat_indices.tolist(),
            np.round(flat_scores.astype(np.float64), 6).tolist(),
            strict=True,
        )
    )
    return [
        tuple(
            RetrievedChunk(ids[i], docs[i], starts[i], ends[i], score)
            for i, score in islice(pairs, n)
        )
        for n in lengths
    ]


def _answerable_metrics(
    cases: Sequence[GoldenCase],
    ranked: Sequence[Ranked],
    picked: ChunkColumns,
    chunks: Sequence[Chunk] | None,
    cfg: EvalConfig,
) -> tuple[dict[int, dict[str, float]], dict[int, tuple[SpanTrace, ...]]]:
    """Metrics of the answerable cases and their span traces (:mod:`ragsweep.eval.trace`:
    ``chunks`` is the run's whole chunk table, None when it is not complete), keyed by
    their position in ``cases``, computed in one batch (see :mod:`ragsweep.eval.metrics`);
    the rankings index ``picked``."""
    positions = [i for i, case in enumerate(cases) if case.scored]
    if not positions:
        return {}, {}
    spans = [[(e.doc, e.start, e.end) for e in cases[i].evidence] for i in positions]
    coded, codes = _coded_chunks(picked, spans)
    depth = max(1, *(len(ranked[i].indices) for i in positions))
    indices = np.full((len(positions), depth), -1, dtype=np.int64)
    for row, i in enumerate(positions):
        indices[row, : len(ranked[i].indices)] = ranked[i].indices
    ranked_batch, span_batch = coded.take(indices), IntervalBatch.from_rows(spans, codes)
    columns = metrics_per_case(
        ranked_batch,
        span_batch,
        IntervalBatch.from_rows(evidence_union(spans), codes),
        cfg.ks,
        cfg.min_span_overlap,
        cfg.budgets,
    )
    names = list(columns)
    rows = zip(*(columns[name].tolist() for name in names), strict=True)
    evidence_docs = (doc for row in spans for doc, _, _ in row)
    traces = span_traces(
        ranked_batch,
        span_batch,
        spans,
        ChunkIntervals.of(chunks, evidence_docs) if chunks is not None else None,
        cfg.min_span_overlap,
    )
    return (
        {i: dict(zip(names, row, strict=True)) for i, row in zip(positions, rows, strict=True)},
        dict(zip(positions, traces, strict=True)),
    )


def _coded_chunks(
    picked: ChunkColumns, spans: Sequence[Sequence[Interval]]
) -> tuple[IntervalBatch, Mapping[str, int]]:
    """The chunks' intervals as one batch row, and the document codes the evidence
    ``spans`` are to be packed with: a chunk table's corpus positions, else codes for the
    documents of both."""
    coded = picked.coded
    if coded is not None:  # views of the table's spans: from_coded copies none of them
        return IntervalBatch.from_coded(coded.doc, coded.start, coded.end), coded.codes
    codes = codes_of(chain(picked.docs, (span[0] for row in spans for span in row)))
    return IntervalBatch.from_columns(picked.docs, picked.starts, picked.ends, codes), codes


@dataclass(frozen=True)
class Summary:
    """Averages over the answerable cases of the evaluated split, overall and per type, each
    with its bootstrap interval (:mod:`ragsweep.eval.uncertainty`).

    ``by_type_min`` is, per metric, the lowest per-type mean (the weakest question type).
    The intervals of all three come from the same resamples, drawn within each type.
    ``counts`` holds ``n_cases``, ``n_answerable``, ``n_unanswerable``; ``scored_counts``
    the answerable cases per type (the ``n`` of each slice); ``extra`` holds latency
    percentiles (ms) and top-1 score means for answerable vs unanswerable cases.
    ``ran_out_at_depth`` counts, per ``ran_out_at_<B>c`` measure, the answerable cases whose
    ranking ran out before budget B filled although it held the whole retrieval depth
    ``top_k`` (a deeper ranking could have added chunks); it is empty when the depth is not
    known.
    ``by_origin`` (with ``by_origin_intervals`` and ``origin_counts``, the answerable cases
    per origin) slices the same means by the cases' origin, hand-written or drafted, when
    the scored cases have more than one (else it is empty: the slice would be the whole);
    each origin's interval resamples within that origin, as a type's does within its type.
    """

    overall: dict[str, float]
    by_type: dict[str, dict[str, float]]
    by_type_min: dict[str, float]
    counts: dict[str, int]
    type_counts: dict[str, int]
    scored_counts: dict[str, int]
    extra: dict[str, float]
    intervals: dict[str, Bounds]
    by_type_intervals: dict[str, dict[str, Bounds]]
    by_type_min_intervals: dict[str, Bounds]
    bootstrap: Bootstrap
    top_k: int | None = None
    ran_out_at_depth: dict[str, int] = field(default_factory=dict)
    access: dict[str, float] = field(default_factory=dict)
    """Access totals (:func:`ragsweep.eval.access.leak_totals`); empty without access
    metadata."""
    access_by_type: dict[str, dict[str, float]] = field(default_factory=dict)
    access_intervals: dict[str, Bounds] = field(default_factory=dict)
    """The interval of ``permission_held``, when the split has permission cases."""
    by_origin: dict[str, dict[str, float]] = field(default_factory=dict)
    by_origin_intervals: dict[str, dict[str, Bounds]] = field(default_factory=dict)
    origin_counts: dict[str, int] = field(default_factory=dict)

    def flat_metrics(self) -> dict[str, float]:
        """MLflow metric keys: ``recall_at_5``, its interval (:func:`interval_keys`),
        ``by_type/<type>/<metric>``, ``by_type_min/<metric>``, ``by_origin/<origin>/<metric>``
        (and ``by_origin/<origin>/n_answerable``), with intervals too, ...; each
        type is its key segment (:func:`ragsweep.eval.metric_keys.type_segment`: the name itself
        when MLflow accepts it, else a slug with a hash suffix)."""
        segment = type_segments(self.type_counts)
        flat: dict[str, float] = _with_intervals("", self.overall, self.intervals)
        for type_name, metrics in self.by_type.items():
            intervals = self.by_type_intervals[type_name]
            flat.update(_with_intervals(f"by_type/{segment[type_name]}/", metrics, intervals))
        flat.update(_with_intervals("by_type_min/", self.by_type_min, self.by_type_min_intervals))
        for origin, metrics in self.by_origin.items():
            prefix = f"{BY_ORIGIN}/{origin}/"
            flat.update(_with_intervals(prefix, metrics, self.by_origin_intervals[origin]))
            flat[prefix + N_ANSWERABLE] = float(self.origin_counts[origin])
        flat.update({k: float(v) for k, v in self.counts.items()})
        flat.update({f"n_cases/{segment[t]}": float(n) for t, n in self.type_counts.items()})
        flat.update({f"n_answerable/{segment[t]}": float(n) for t, n in self.scored_counts.items()})
        flat.update(self.extra)
        flat.update(self._access_metrics(segment))
        return flat

    def _access_metrics(self, segment: Mapping[str, str]) -> dict[str, float]:
        flat = {k: v for k, v in self.access.items() if k not in self.access_intervals}
        rates = {k: self.access[k] for k in self.access_intervals}
        flat.update(_with_intervals("", rates, self.access_intervals))
        for type_name, totals in self.access_by_type.items():
            flat.update({f"by_type/{segment[type_name]}/{k}": v for k, v in totals.items()})
        return flat

    def key_tags(self) -> dict[str, str]:
        """The ``ragsweep.type_keys`` tag: renamed types' key segments → their names."""
        return key_tags(self.type_counts)


def _with_intervals(
    prefix: str, means: Mapping[str, float], bounds: Mapping[str, Bounds]
) -> dict[str, float]:
    flat: dict[str, float] = {}
    for name, value in means.items():
        low, high = interval_keys(name)
        flat[prefix + name] = value
        flat[prefix + low], flat[prefix + high] = bounds[name].low, bounds[name].high
    return flat


def summarize(results: Sequence[CaseResult], cfg: EvalConfig, top_k: int | None = None) -> Summary:
    """Average per-case metrics (a separate step from computing them), slice by type, and
    bootstrap every mean (``cfg.bootstrap_resamples`` resamples from ``cfg.seed``).
    ``top_k`` is the retrieval depth the rankings were cut at, if known."""
    bootstrap = Bootstrap(cfg.bootstrap_resamples, cfg.seed)
    scored = [(r.type, r.metrics) for r in results if r.metrics is not None]
    slices = _slices(scored)
    origins = _slices([(r.origin, r.metrics) for r in results if r.metrics is not None])
    by_type = {t: mean_by_key(rows) for t, rows in slices.items()}
    overall = mean_by_key([m for _, m in scored])
    by_type_min = {m: min(t[m] for t in by_type.values()) for m in overall} if by_type else {}
    bounds = stratified_intervals(slices, list(overall), bootstrap)
    type_counts = {t: sum(r.type == t for r in results) for t in sorted({r.type for r in results})}
    access = summarize_access([(r.type, r.access) for r in results], bootstrap)
    if len(origins) < 2:  # the one origin's slice would be the whole
        origins = {}
    origin_bounds = stratified_intervals(origins, list(overall), bootstrap)
    return Summary(
        overall=overall,
        by_type=by_type,
        by_type_min=by_type_min,
        counts={
            "n_cases": len(results),
            N_ANSWERABLE: len(scored),
            "n_unanswerable": len(results) - len(scored),
        },
        type_counts=type_counts,
        scored_counts={t: len(rows) for t, rows in slices.items()},
        extra=_latency_and_scores(results),
        intervals=bounds.overall,
        by_type_intervals=bounds.by_stratum,
        by_type_min_intervals=bounds.weakest,
        bootstrap=bootstrap,
        top_k=top_k,
        ran_out_at_depth=_ran_out_at_depth(results, cfg.budgets, top_k),
        access=access[0],
        access_by_type=access[1],
        access_intervals=access[2],
        by_origin={o: mean_by_key(rows) for o, rows in origins.items()},
        by_origin_intervals=origin_bounds.by_stratum,
        origin_counts={o: len(rows) for o, rows in origins.items()},
    )


def _slices(
    keyed: Sequence[tuple[str, dict[str, float]]],
) -> dict[str, list[dict[str, float]]]:
    """The per-case metrics grouped by their key (a type, an origin), keys sorted."""
    return {k: [m for key, m in keyed if key == k] for k in sorted({k for k, _ in keyed})}


def _ran_out_at_depth(
    results: Sequence[CaseResult], budgets: Sequence[int], top_k: int | None
) -> dict[str, int]:
    """Per budget, the answerable cases that ran out of a ranking ``top_k`` chunks long."""
    if top_k is None:
        return {}
    names = [Measure(RAN_OUT, budget=b).name for b in budgets]
    full = [r.metrics for r in results if r.metrics is not None and len(r.retrieved) >= top_k]
    return {name: sum(m[name] > 0 for m in full) for name in names}


def _latency_and_scores(results: Sequence[CaseResult]) -> dict[str, float]:
    extra: dict[str, float] = {}
    if results:
        latencies = np.array([r.seconds * 1000 for r in results])
        extra["latency_ms_p50"] = float(np.percentile(latencies, 50))
        extra["latency_ms_p95"] = float(np.percentile(latencies, 95))
    for label, answerable in (("answerable", True), ("unanswerable", False)):
        top1 = [r.retrieved[0].score for r in results if r.answerable == answerable and r.retrieved]
        if top1:
            extra[f"{label}/top1_score_mean"] = float(np.mean(top1))
    return extra
