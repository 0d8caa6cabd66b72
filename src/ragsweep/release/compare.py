"""Paired comparison of two runs over the same golden cases (``ragsweep-compare``).

Both runs' ``cases.jsonl`` are read from the store and matched by case id. The comparison
refuses runs whose golden digest, split or corpus hash differ (their cases are not the same
cases) unless forced. It reports per-metric deltas overall and per question type, the cases
that flipped between hit and miss at the primary k with what each run retrieved first, a
paired randomization test on the per-case primary metric with the interval obtained by
inverting it (so the interval excludes 0 exactly when p <= alpha), p50/p95 per-query
retrieval latency deltas, and a decision line. With several candidates against one baseline
each comparison's p-value is Holm-adjusted over the candidates (``p_adjusted``) and the
verdicts use the adjusted one: the chance that any candidate is called better or worse on
noise is at most alpha.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ragsweep.config.schema import EvalConfig, from_mapping
from ragsweep.core import tags as tag
from ragsweep.core.errors import RagsweepError
from ragsweep.eval import measures
from ragsweep.eval.attribution import (
    CaseSide,
    Cause,
    counts,
    explain,
    hit_measure,
)
from ragsweep.eval.measures import Measure
from ragsweep.eval.metric_keys import N_ANSWERABLE
from ragsweep.eval.power import PowerAssumptions, power_remark
from ragsweep.eval.scoring import CaseResult, RetrievedChunk, summarize
from ragsweep.eval.stats import PairedTest, holm, paired_randomization_test
from ragsweep.eval.trace import SpanTrace
from ragsweep.release.errors import ComparisonError
from ragsweep.release.store import LoggedRun, RunStore
from ragsweep.run.report import metric_columns

# What must match for two runs' per-case hits to mean the same thing: the same questions and
# labels, the same documents, and the same relevance rule.
IDENTITY_TAGS = (tag.GOLDEN_DIGEST, tag.SPLIT, tag.CORPUS_HASH, tag.MIN_SPAN_OVERLAP)
LATENCY_KEYS = ("latency_ms_p50", "latency_ms_p95")
UNKNOWN_CHARS = "unknown"
"""``chunk_chars`` of a span row when the run's chunks are not its complete chunking."""


@dataclass(frozen=True)
class Delta:
    """One figure in both runs; ``delta`` is candidate − baseline."""

    baseline: float
    candidate: float

    @property
    def delta(self) -> float:
        return self.candidate - self.baseline

    def to_json(self) -> dict[str, float]:
        return {"baseline": self.baseline, "candidate": self.candidate, "delta": self.delta}


@dataclass(frozen=True)
class Flip:
    """A case whose hit measure differs between the runs: its question (None when the run
    did not record it), each run's first chunk (None when nothing was retrieved), each
    run's view of its evidence spans (:class:`~ragsweep.eval.attribution.CaseSide`) and
    why the run that misses it missed it (:func:`~ragsweep.eval.attribution.explain`)."""

    case_id: str
    type: str
    question: str | None
    baseline_first: RetrievedChunk | None
    candidate_first: RetrievedChunk | None
    baseline: CaseSide
    candidate: CaseSide
    cause: Cause

    def to_json(self) -> dict[str, Any]:
        def first(chunk: RetrievedChunk | None) -> dict[str, Any] | None:
            return chunk._asdict() if chunk is not None else None

        return {
            "id": self.case_id,
            "type": self.type,
            "question": self.question,
            "baseline_first": first(self.baseline_first),
            "candidate_first": first(self.candidate_first),
            "spans": span_rows(self.baseline, self.candidate),
            "cause": self.cause.to_json(),
        }


@dataclass(frozen=True)
class Comparison:
    """Everything ``ragsweep-compare`` reports about a candidate run against a baseline.

    ``metric`` is the primary per-case metric (tested for significance) and ``flips_on`` the
    hit measure flips are counted on: ``hit`` at the primary metric's cut-off or budget
    (``recall_at_2000c`` → ``hit_at_2000c``), else at the largest k. ``n_cases`` cases are
    paired, ``n_answerable`` of them scored in both runs. ``lost`` are hit → miss,
    ``gained`` miss → hit. Latency is in milliseconds per query. ``mismatches`` lists
    identity tags that differ and ``unpaired`` the cases found in one run only; both are
    empty unless the comparison was forced.
    """

    baseline: LoggedRun
    candidate: LoggedRun
    metric: str
    flips_on: str
    alpha: float
    n_cases: int
    n_answerable: int
    overall: dict[str, Delta]
    by_type: dict[str, dict[str, Delta]]
    type_counts: dict[str, int]
    lost: tuple[Flip, ...]
    gained: tuple[Flip, ...]
    test: PairedTest
    latency: dict[str, Delta]
    mismatches: tuple[str, ...]
    unpaired: tuple[str, ...]
    tuning_delta: float | None = None
    """For two promoted (holdout) runs: the metric's difference between the tuning runs
    they were promoted from (None otherwise)."""
    p_adjusted: float | None = None
    family: int = 1

    @property
    def attribution(self) -> dict[str, dict[str, int]]:
        """How many lost and gained cases each pipeline stage explains
        (:func:`~ragsweep.eval.attribution.counts`)."""
        return {
            "lost": counts(f.cause for f in self.lost),
            "gained": counts(f.cause for f in self.gained),
        }

    @property
    def power(self) -> str | None:
        """When the test could not have detected the difference seen on tuning (or, for
        runs not promoted, the one seen here): :func:`ragsweep.eval.power.power_remark`."""
        if self.verdict != "inconclusive":
            return None
        seen = self.tuning_delta if self.tuning_delta is not None else self.test.mean_difference
        remark = power_remark(self.n_answerable, seen, PowerAssumptions(alpha=self.alpha))
        if remark is None or self.tuning_delta is None:
            return remark
        return f"on tuning the difference was {self.tuning_delta:+.4f}; {remark}"

    @property
    def p_decisive(self) -> float:
        """The p-value the verdict uses: Holm-adjusted over the candidates when several."""
        return self.test.p_value if self.p_adjusted is None else self.p_adjusted

    @property
    def verdict(self) -> str:
        """``adopt``, ``reject`` or ``inconclusive`` from the primary metric's paired test."""
        gain = measures.parse(self.metric).gain(self.test.mean_difference, 0.0)
        if self.p_decisive <= self.alpha and gain > 0:
            return "adopt"
        if self.p_decisive <= self.alpha and gain < 0:
            return "reject"
        return "inconclusive"

    def decision(self) -> str:
        """The one-line summary a reviewer acts on."""
        meaning = {
            "adopt": "candidate is significantly better",
            "reject": "candidate is significantly worse",
            "inconclusive": "no significant difference",
        }[self.verdict]
        relation = "≤" if self.p_decisive <= self.alpha else ">"
        t = self.test
        adjusted = (
            ""
            if self.p_adjusted is None
            else f", Holm-adjusted over {self.family} candidates {self.p_adjusted:.4f}"
        )
        line = (
            f"Decision: {self.verdict.upper()} ({meaning}): {self.metric} "
            f"{t.mean_difference:+.4f} [{t.low:+.4f}, {t.high:+.4f}] ({t.level:.0%}), "
            f"{t.gained} up / {t.lost} down, p = {t.p_value:.4f}{adjusted} {relation} "
            f"α = {self.alpha}; {self.flips_on}: {len(self.gained)} gained, "
            f"{len(self.lost)} lost"
        )
        if not t.can_reject(self.alpha):
            line += (
                f"; only {t.n_nonzero} case(s) changed: no paired test can reach "
                f"p <= {self.alpha} (smallest possible p {t.smallest_p:.4f})"
            )
        if "latency_ms_p95" in self.latency:
            line += f"; p95 latency {self.latency['latency_ms_p95'].delta:+.3f} ms"
        if self.mismatches or self.unpaired:
            line = "FORCED comparison, figures not comparable as-is. " + line
        return line

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline_run": self.baseline.run_id,
            "candidate_run": self.candidate.run_id,
            "metric": self.metric,
            "flips_on": self.flips_on,
            "alpha": self.alpha,
            "n_cases": self.n_cases,
            N_ANSWERABLE: self.n_answerable,
            "overall": {m: d.to_json() for m, d in self.overall.items()},
            "by_type": {
                t: {m: d.to_json() for m, d in metrics.items()}
                for t, metrics in self.by_type.items()
            },
            "type_counts": self.type_counts,
            "flips": {
                "hit_to_miss": [f.to_json() for f in self.lost],
                "miss_to_hit": [f.to_json() for f in self.gained],
            },
            "attribution": self.attribution,
            "test": {
                "name": "paired randomization (sign-flip), two-sided",
                "n": self.test.n,
                "n_nonzero": self.test.n_nonzero,
                "gained": self.test.gained,
                "lost": self.test.lost,
                "mean_difference": self.test.mean_difference,
                "interval": [self.test.low, self.test.high],
                "interval_level": self.test.level,
                "p_value": self.test.p_value,
                "p_adjusted": self.p_adjusted,
                "family": self.family,
                "resamples": self.test.resamples,
                "exact": self.test.exact,
                "seed": self.test.seed,
            },
            "latency_ms": {m: d.to_json() for m, d in self.latency.items()},
            "mismatches": list(self.mismatches),
            "unpaired": list(self.unpaired),
            "verdict": self.verdict,
            "decision": self.decision(),
            "tuning_delta": self.tuning_delta,
            "power": self.power,
        }


def identity_mismatches(baseline: LoggedRun, candidate: LoggedRun) -> tuple[str, ...]:
    """One line per identity tag (golden digest, split, corpus hash, relevance rule) that
    differs."""
    return tuple(
        f"{key}: baseline {baseline.tag(key)!r} vs candidate {candidate.tag(key)!r}"
        for key in IDENTITY_TAGS
        if baseline.tag(key) != candidate.tag(key)
    )


def flip_measure(metric: Measure, ks: Sequence[int]) -> Measure:
    """``hit`` at ``metric``'s cut-off or budget (``recall_at_5`` → ``hit_at_5``), else at
    the largest of ``ks`` (``mrr`` → ``hit_at_10``); see
    :func:`ragsweep.eval.attribution.hit_measure`."""
    measure = hit_measure(metric, ks)
    assert measure is not None  # eval.ks is never empty
    return measure


def compare_runs(
    store: RunStore,
    baseline_id: str,
    candidate_id: str,
    metric: str | None = None,
    force: bool = False,
    resamples: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
) -> Comparison:
    """Compare ``candidate_id`` against ``baseline_id`` case by case (module docstring).

    ``metric`` defaults to the candidate's ``eval.objective``; ``alpha`` is the significance
    level of the decision line.
    """
    baseline, candidate = store.get(baseline_id), store.get(candidate_id)
    mismatches, pairs, unpaired = _comparable_cases(store, baseline, candidate, force)
    eval_cfg = from_mapping(EvalConfig, store.config(candidate.run_id).get("eval"), "eval")
    primary = measures.require_computed(
        metric or eval_cfg.objective, eval_cfg.ks, eval_cfg.budgets, key="--metric"
    )
    metric = primary.name
    flips_on = flip_measure(primary, eval_cfg.ks).name
    scored = _scored_pairs(pairs, [metric, flips_on], baseline, candidate)
    flip = _flipper(store.questions(candidate.run_id), measures.parse(flips_on))
    base_summary = summarize([b for b, _ in pairs], eval_cfg)
    cand_summary = summarize([c for _, c in pairs], eval_cfg)
    columns = metric_columns(cand_summary, eval_cfg)
    return Comparison(
        baseline=baseline,
        candidate=candidate,
        metric=metric,
        flips_on=flips_on,
        alpha=alpha,
        n_cases=len(pairs),
        n_answerable=len(scored),
        overall=_deltas(base_summary.overall, cand_summary.overall, columns),
        by_type={
            t: _deltas(base_summary.by_type[t], metrics, columns)
            for t, metrics in cand_summary.by_type.items()
            if t in base_summary.by_type
        },
        type_counts=_type_counts(scored),
        lost=tuple(flip(b, c) for b, c in scored if _hit(b, flips_on) and not _hit(c, flips_on)),
        gained=tuple(flip(b, c) for b, c in scored if _hit(c, flips_on) and not _hit(b, flips_on)),
        test=paired_randomization_test(
            [_value(c, metric) - _value(b, metric) for b, c in scored], resamples, seed, 1 - alpha
        ),
        latency=_deltas(base_summary.extra, cand_summary.extra, LATENCY_KEYS),
        mismatches=mismatches,
        unpaired=tuple(unpaired),
        tuning_delta=_tuning_delta(store, baseline, candidate, metric),
    )


def _tuning_delta(
    store: RunStore, baseline: LoggedRun, candidate: LoggedRun, metric: str
) -> float | None:
    """candidate − baseline on ``metric`` between the tuning runs two promoted runs came
    from (None: not both promoted, or a tuning run or its metric is gone)."""
    sources = [run.tags.get(tag.PROMOTED_FROM) for run in (baseline, candidate)]
    if not all(sources):
        return None
    try:
        values = [store.get(str(source)).metrics.get(metric) for source in sources]
    except RagsweepError:
        return None
    base, cand = values
    return None if base is None or cand is None else cand - base


def adjust_candidates(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """Several candidates against one baseline: each p-value Holm-adjusted over all of
    them (a single comparison is returned as it is)."""
    if len(comparisons) < 2:
        return list(comparisons)
    adjusted = holm([c.test.p_value for c in comparisons], 1.0)
    return [
        replace(c, p_adjusted=p, family=len(comparisons))
        for c, p in zip(comparisons, adjusted, strict=True)
    ]


def _comparable_cases(
    store: RunStore, baseline: LoggedRun, candidate: LoggedRun, force: bool
) -> tuple[tuple[str, ...], list[tuple[CaseResult, CaseResult]], list[str]]:
    """The identity mismatches, the paired cases and the ids found in one run only; refuses
    (unless ``force``) incomplete runs, runs on other data and runs with unpaired cases."""
    for run in (baseline, candidate):
        run.require_complete()
    mismatches = identity_mismatches(baseline, candidate)
    if mismatches and not force:
        raise ComparisonError(
            f"runs {baseline.run_id} and {candidate.run_id} were not evaluated on the same "
            f"cases ({'; '.join(mismatches)}); pass --force to compare anyway"
        )
    pairs, unpaired = _pair(store.cases(baseline.run_id), store.cases(candidate.run_id))
    if unpaired and not force:
        raise ComparisonError(
            f"{len(unpaired)} case(s) are in only one of runs {baseline.run_id} and "
            f"{candidate.run_id} (e.g. {unpaired[0]!r}); pass --force to compare the shared ones"
        )
    return mismatches, pairs, unpaired


def _pair(
    baseline: Sequence[CaseResult], candidate: Sequence[CaseResult]
) -> tuple[list[tuple[CaseResult, CaseResult]], list[str]]:
    """Cases matched by id in the candidate's order, and the ids found in one run only."""
    by_id = {c.id: c for c in baseline}
    candidate_ids = {c.id for c in candidate}
    pairs = [(by_id[c.id], c) for c in candidate if c.id in by_id]
    unpaired = sorted(set(by_id) ^ candidate_ids)
    return pairs, unpaired


def _scored_pairs(
    pairs: Sequence[tuple[CaseResult, CaseResult]],
    needed: Sequence[str],
    baseline: LoggedRun,
    candidate: LoggedRun,
) -> list[tuple[CaseResult, CaseResult]]:
    """Pairs scored in both runs; each needed metric must exist in both runs' cases."""
    scored = [(b, c) for b, c in pairs if b.metrics is not None and c.metrics is not None]
    if not scored:
        raise ComparisonError(
            f"runs {baseline.run_id} and {candidate.run_id} share no answerable case"
        )
    for name in needed:
        for run, case in ((baseline, scored[0][0]), (candidate, scored[0][1])):
            if name not in (case.metrics or {}):
                available = ", ".join(sorted(case.metrics or {}))
                raise ComparisonError(
                    f"metric {name!r} is not in the per-case metrics of run {run.run_id} "
                    f"(available: {available})"
                )
    return scored


def _deltas(
    baseline: Mapping[str, float], candidate: Mapping[str, float], keys: Sequence[str]
) -> dict[str, Delta]:
    return {k: Delta(baseline[k], candidate[k]) for k in keys if k in baseline and k in candidate}


def _type_counts(scored: Sequence[tuple[CaseResult, CaseResult]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _, case in scored:
        counts[case.type] = counts.get(case.type, 0) + 1
    return dict(sorted(counts.items()))


def _value(case: CaseResult, metric: str) -> float:
    assert case.metrics is not None  # only scored pairs get here
    return case.metrics[metric]


def _hit(case: CaseResult, measure: str) -> bool:
    return _value(case, measure) > 0


def _flipper(
    questions: Mapping[str, str], measure: Measure
) -> Callable[[CaseResult, CaseResult], Flip]:
    """A function making the :class:`Flip` of a flipped pair, on hit ``measure``."""

    def flip(baseline: CaseResult, candidate: CaseResult) -> Flip:
        sides = [CaseSide.of(r.spans, r.metrics or {}, measure) for r in (baseline, candidate)]
        miss, hit = sides if not _hit(baseline, measure.name) else sides[::-1]
        return Flip(
            case_id=candidate.id,
            type=candidate.type,
            question=questions.get(candidate.id),
            baseline_first=baseline.retrieved[0] if baseline.retrieved else None,
            candidate_first=candidate.retrieved[0] if candidate.retrieved else None,
            baseline=sides[0],
            candidate=sides[1],
            cause=explain(miss, hit),
        )

    return flip


def span_rows(baseline: CaseSide, candidate: CaseSide) -> list[dict[str, Any]]:
    """Per evidence span, its rank, whether it was packed (reached within the cut-off or
    budget) and the length of the shortest chunk that hits it (None: split, ``unknown``:
    not recorded) in each run; empty when a
    run did not record span traces or the runs' case has a different number of evidence
    spans (the golden case changed: spans cannot be paired, as in
    :func:`~ragsweep.eval.attribution.explain`)."""
    if baseline.spans is None or candidate.spans is None:
        return []
    if len(baseline.spans) != len(candidate.spans):
        return []
    return [
        {
            run: {"rank": t.rank, "packed": side.reached(t), "chunk_chars": _chunk_chars(t)}
            for run, side, t in (("baseline", baseline, b), ("candidate", candidate, c))
        }
        for b, c in zip(baseline.spans, candidate.spans, strict=True)
    ]


def _chunk_chars(trace: SpanTrace) -> int | str | None:
    """The length of the shortest chunk that hits the span, None when split, ``unknown``
    when the run's chunks are not its complete chunking."""
    return trace.chunk_chars if trace.chunked else UNKNOWN_CHARS


def log_comparison(store: RunStore, comparison: Comparison, markdown: str) -> None:
    """Attach ``comparison.md`` and ``comparison.json`` to the candidate run and tag it with
    the baseline's id."""
    run_id = comparison.candidate.run_id
    store.log_text(run_id, markdown, "comparison.md")
    store.log_text(
        run_id, json.dumps(comparison.to_json(), indent=2, ensure_ascii=False), "comparison.json"
    )
    store.set_tag(run_id, tag.COMPARED_WITH, comparison.baseline.run_id)
