"""Why a case flipped between two runs: the first pipeline stage that lost its evidence.

A case flips on a hit measure (``hit_at_k`` or ``hit_at_<B>c``) when one run (the *hit*
run) reaches an evidence span within the cut-off or budget and the other (the *miss* run)
does not. Of the spans the hit run reaches, the one it ranks highest is followed through
the miss run's pipeline, stage by stage, from each run's span traces
(:mod:`ragsweep.eval.trace`) and, for a budget, the chunks the budget packed
(``chunks_used_at_<B>c``):

1. **chunking**: no chunk of the miss run hits the span (a chunk boundary splits it),
   or, on a budget measure, the chunk that hits it is larger than the hit run's and was
   retrieved at the same or a better rank but not packed (merged into a chunk too large
   for the budget): only then does chunk size plausibly decide the measure;
2. **candidate depth**: a chunk hits it but is not among the retrieved chunks
   (``retrieval.top_k``);
3. **ranking**: retrieved, at a lower rank than in the hit run (other chunks rank above);
4. **packing** (budgets only): retrieved at the same or a better rank, but not packed:
   the chunks above it filled the budget.

Where the chunks that hit the span differ in size but size did not decide, the depth or
ranking detail gives both sizes. When a run's chunks are not its complete chunking
(:attr:`~ragsweep.eval.trace.SpanTrace.chunked` False) the chunking stage is skipped.
Each stage has a next action (:data:`ACTIONS`). A case without traces (a run logged before
they were recorded) is ``unknown``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ragsweep.eval.measures import CHUNKS_USED, HIT, Measure
from ragsweep.eval.trace import SpanTrace

CHUNKING = "chunking"
DEPTH = "candidate depth"
RANKING = "ranking"
PACKING = "packing"
UNKNOWN = "unknown"
STAGES = (CHUNKING, DEPTH, RANKING, PACKING, UNKNOWN)
"""Pipeline order; tables list the stages in it."""

SPLIT = "split"
MERGED = "merged"
ACTIONS = {
    SPLIT: "a larger chunking.overlap (or a larger chunking.size) so one chunk hits the span",
    MERGED: "a smaller chunking.size, so the chunk that hits the span fits the budget",
    DEPTH: "a larger retrieval.top_k, or another retriever (hybrid, dense)",
    RANKING: "a reranker (rerank), or another retriever (hybrid, dense)",
    PACKING: "a larger budget, or smaller chunks (chunking.size) so more of them fit",
    UNKNOWN: "re-run both configurations: their cases.jsonl predate span traces",
}
"""The next action each cause suggests for a lost case: by stage, and for chunking by
what happened to the span (split or merged)."""


def hit_measure(metric: Measure, ks: Sequence[int] = ()) -> Measure | None:
    """The hit measure flips of ``metric`` are counted on: ``hit`` at its cut-off or budget
    (``recall_at_2000c`` → ``hit_at_2000c``), else at the largest of ``ks`` (None when
    there are none)."""
    if metric.budget is not None:
        return Measure(HIT, budget=metric.budget)
    if metric.k is not None or ks:
        return Measure(HIT, k=metric.k or max(ks))
    return None


@dataclass(frozen=True)
class CaseSide:
    """One run's view of a case: its span traces (None: not recorded) and its *reach*, the
    deepest rank that counts (``k``, or the chunks a budget packed); ``budget``: the hit
    measure is a budget's."""

    spans: tuple[SpanTrace, ...] | None
    reach: int
    budget: bool = False

    def reached(self, trace: SpanTrace) -> bool:
        return trace.rank is not None and trace.rank <= self.reach

    @classmethod
    def of(
        cls, spans: tuple[SpanTrace, ...] | None, metrics: Mapping[str, float], measure: Measure
    ) -> CaseSide:
        """``measure`` is the hit measure the flip is counted on."""
        if measure.budget is not None:
            reach = int(metrics.get(Measure(CHUNKS_USED, budget=measure.budget).name, 0))
        else:
            reach = measure.k or 0
        return cls(spans, reach, measure.budget is not None)


@dataclass(frozen=True)
class Cause:
    """Why the miss run missed: the ``stage``, the evidence span followed (0-based, None
    when unknown), what happened to it (``detail``) and the next action (``kind``: its key
    in :data:`ACTIONS`)."""

    stage: str
    span: int | None
    detail: str
    kind: str = ""

    @property
    def action(self) -> str:
        return ACTIONS[self.kind or self.stage]

    def to_json(self) -> dict[str, object]:
        return {
            "stage": self.stage,
            "span": self.span,
            "detail": self.detail,
            "action": self.action,
        }


def explain(miss: CaseSide, hit: CaseSide) -> Cause:
    """The first stage at which ``miss`` lost the evidence ``hit`` reached (module
    docstring)."""
    if miss.spans is None or hit.spans is None or len(miss.spans) != len(hit.spans):
        return Cause(UNKNOWN, None, "span traces not recorded in both runs")
    reached = [s for s, t in enumerate(hit.spans) if hit.reached(t)]
    if not reached:
        return Cause(UNKNOWN, None, "no evidence span is reached in the hit run")
    kept = hit.spans
    span = min(reached, key=lambda s: kept[s].rank or 0)
    return Cause(span=span, **_stage(miss.spans[span], kept[span], miss))


def _stage(lost: SpanTrace, kept: SpanTrace, miss: CaseSide) -> dict[str, str]:
    """The stage, what happened and the action's key, for the span's trace in the miss run
    (``lost``; ``miss`` its side) and in the hit run (``kept``)."""
    if lost.split:
        detail = "split by a chunk boundary: no chunk hits the whole span"
        return {"stage": CHUNKING, "detail": detail, "kind": SPLIT}
    sizes = _sizes(lost, kept)
    if lost.rank is None:
        return {"stage": DEPTH, "detail": f"its chunk is not among the retrieved chunks{sizes}"}
    if kept.rank is not None and lost.rank > kept.rank:
        detail = f"its chunk fell from rank {kept.rank} to {lost.rank}{sizes}"
        return {"stage": RANKING, "detail": detail}
    unpacked = f"retrieved at rank {lost.rank}, but only {miss.reach} chunk(s) were packed"
    if miss.budget and _larger(lost, kept):
        detail = f"merged into a larger chunk{sizes}: {unpacked}"
        return {"stage": CHUNKING, "detail": detail, "kind": MERGED}
    return {"stage": PACKING, "detail": unpacked}


def _larger(lost: SpanTrace, kept: SpanTrace) -> bool:
    """The chunk that hits the span is larger in the miss run (both sizes known)."""
    if lost.chunk_chars is None or kept.chunk_chars is None:
        return False
    return lost.chunk_chars > kept.chunk_chars


def _sizes(lost: SpanTrace, kept: SpanTrace) -> str:
    """`` (its chunk 80 → 400 characters)`` when the sizes are known and differ."""
    if lost.chunk_chars == kept.chunk_chars or not (lost.chunked and kept.chunked):
        return ""
    return f" (its chunk {_chars(kept)} → {_chars(lost)} characters)"


def _chars(trace: SpanTrace) -> str:
    return "split" if trace.chunk_chars is None else str(trace.chunk_chars)


def counts(causes: Iterable[Cause]) -> dict[str, int]:
    """How many causes each stage has, in pipeline order (stages without any left out)."""
    tally = dict.fromkeys(STAGES, 0)
    for cause in causes:
        tally[cause.stage] += 1
    return {stage: n for stage, n in tally.items() if n}


def describe_counts(tally: Mapping[str, int]) -> str:
    """``ranking 3, packing 1`` (``none`` when empty)."""
    return ", ".join(f"{stage} {n}" for stage, n in tally.items()) or "none"
