"""Score retrieval on golden cases: per-case metrics, then averaging and slicing.

Answerable cases get retrieval metrics (see docs/metrics.md). Unanswerable cases get none:
they are counted, and their top-1 retrieval score is reported beside the answerable cases'
so a no-answer threshold can be chosen; they never count as perfect (or zero) recall.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragsweep.chunking import Chunk
from ragsweep.config import EvalConfig
from ragsweep.golden import GoldenCase
from ragsweep.index import Index, Query, Ranked
from ragsweep.metrics import case_metrics, mean_by_key
from ragsweep.preprocess import Preprocessor
from ragsweep.progress import progress_bar

SEARCH_BATCH = 256


@dataclass(frozen=True)
class RetrievedChunk:
    """One retrieved chunk of a case, with its source span and score."""

    chunk_id: str
    doc: str
    start: int
    end: int
    score: float


@dataclass(frozen=True)
class CaseResult:
    """Outcome of one golden case. ``metrics`` is None for unanswerable cases."""

    id: str
    type: str
    split: str
    answerable: bool
    metrics: dict[str, float] | None
    retrieved: tuple[RetrievedChunk, ...]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "split": self.split,
            "answerable": self.answerable,
            "metrics": self.metrics,
            "latency_ms": round(self.seconds * 1000, 3),
            "retrieved": [vars(r) for r in self.retrieved],
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> CaseResult:
        """Inverse of :meth:`to_json` (one ``cases.jsonl`` line; latency there is in ms)."""
        return cls(
            id=row["id"],
            type=row["type"],
            split=row["split"],
            answerable=row["answerable"],
            metrics=row["metrics"],
            retrieved=tuple(RetrievedChunk(**r) for r in row["retrieved"]),
            seconds=row["latency_ms"] / 1000,
        )


def retrieve(
    cases: Sequence[GoldenCase],
    index: Index,
    preprocessor: Preprocessor,
    scope_mask: Callable[[Sequence[str] | None], np.ndarray | None],
    top_k: int,
) -> list[Ranked]:
    """Run every case's question through ``index``; scopes restrict the candidate chunks."""
    queries = [Query(preprocessor(c.question), scope_mask(c.scope)) for c in cases]
    ranked: list[Ranked] = []
    with progress_bar("searching", len(queries)) as advance:
        for begin in range(0, len(queries), SEARCH_BATCH):
            batch = queries[begin : begin + SEARCH_BATCH]
            ranked.extend(index.search(batch, top_k, preprocessor.identity))
            advance(len(batch))
    return ranked


def score_case(
    case: GoldenCase, ranked: Ranked, chunks: Sequence[Chunk], cfg: EvalConfig
) -> CaseResult:
    """Per-case metrics from one ranking (None for unanswerable cases)."""
    hits = [chunks[int(i)] for i in ranked.indices]
    retrieved = tuple(
        RetrievedChunk(c.id, c.doc, c.start, c.end, round(float(s), 6))
        for c, s in zip(hits, ranked.scores, strict=True)
    )
    metrics = None
    if case.answerable:
        spans = [(e.doc, e.start, e.end) for e in case.evidence]
        metrics = case_metrics(
            [(c.doc, c.start, c.end) for c in hits], spans, cfg.ks, cfg.min_span_overlap
        )
    return CaseResult(
        id=case.id,
        type=case.type,
        split=case.split,
        answerable=case.answerable,
        metrics=metrics,
        retrieved=retrieved,
        seconds=ranked.seconds,
    )


@dataclass(frozen=True)
class Summary:
    """Averages over the answerable cases of the evaluated split, overall and per type.

    ``by_type_min`` is, per metric, the lowest per-type mean (the weakest question type).
    ``counts`` holds ``n_cases``, ``n_answerable``, ``n_unanswerable``; ``extra`` holds
    latency percentiles (ms) and top-1 score means for answerable vs unanswerable cases.
    """

    overall: dict[str, float]
    by_type: dict[str, dict[str, float]]
    by_type_min: dict[str, float]
    counts: dict[str, int]
    type_counts: dict[str, int]
    scored_counts: dict[str, int]
    extra: dict[str, float]

    def flat_metrics(self) -> dict[str, float]:
        """MLflow metric keys: ``recall_at_5``, ``by_type/<type>/<metric>``, ..."""
        flat: dict[str, float] = dict(self.overall)
        for type_name, metrics in self.by_type.items():
            flat.update({f"by_type/{type_name}/{k}": v for k, v in metrics.items()})
        flat.update({f"by_type_min/{k}": v for k, v in self.by_type_min.items()})
        flat.update({k: float(v) for k, v in self.counts.items()})
        flat.update({f"n_cases/{t}": float(n) for t, n in self.type_counts.items()})
        flat.update({f"n_answerable/{t}": float(n) for t, n in self.scored_counts.items()})
        flat.update(self.extra)
        return flat


def summarize(results: Sequence[CaseResult]) -> Summary:
    """Average per-case metrics (a separate step from computing them) and slice by type."""
    scored = [(r.type, r.metrics) for r in results if r.metrics is not None]
    by_type = {
        type_name: mean_by_key([m for t, m in scored if t == type_name])
        for type_name in sorted({t for t, _ in scored})
    }
    overall = mean_by_key([m for _, m in scored])
    by_type_min = {m: min(t[m] for t in by_type.values()) for m in overall} if by_type else {}
    type_counts = {t: sum(r.type == t for r in results) for t in sorted({r.type for r in results})}
    return Summary(
        overall=overall,
        by_type=by_type,
        by_type_min=by_type_min,
        counts={
            "n_cases": len(results),
            "n_answerable": len(scored),
            "n_unanswerable": len(results) - len(scored),
        },
        type_counts=type_counts,
        scored_counts={t: sum(st == t for st, _ in scored) for t in by_type},
        extra=_latency_and_scores(results),
    )


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
