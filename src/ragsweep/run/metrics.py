"""The metrics an MLflow run shows, defined once: names, meanings, and where the rest go.

A run computes a few hundred figures (:meth:`ragsweep.eval.scoring.Summary.flat_metrics`,
timings, cache counters, the judge's). Only the *headline* set below is logged as MLflow
metrics, so the run page and the compare view list a few dozen rows that matter:

- the headline measures at every cut-off and budget of the run (``eval.ks``,
  ``eval.budgets``): ``recall`` and ``hit`` (:data:`HEADLINE_FAMILIES`), ``mrr``, and the
  run's objective whatever family it is;
- each one's 95% bootstrap interval (``<measure>_ci_low``, ``<measure>_ci_high``) and its
  weakest-type mean (``by_type_min/<measure>``);
- when a run scored both hand-written and drafted cases (docs/golden.md), each of those and
  ``n_answerable`` per origin (``by_origin/<origin>/<measure>``);
- the counts :data:`COUNTS` and the timings :data:`TIMINGS` (and per search stage, when a
  run has stages);
- with a judge, its overall figures ``judge/<metric>`` (docs/judge.md).

Every figure, headline included, goes to the run's MLflow tables: the per-type means and
intervals (``by_type/<type>/<measure>``) to ``by_type.json`` (one row per slice and measure,
with its interval and ``n``), every other figure to ``figures.json`` (columns ``figure``,
``value``; the same names), so no figure is stored twice. Readers that need a figure
outside the headline (a gate floor on ``by_type/<type>/mrr``, promotion's per-type table)
read both (:func:`read_figures`, :func:`by_type_figures`). docs/tracking.md lists the
names and meanings; :data:`DOCUMENTED` is that list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragsweep.eval.measures import HIT, MRR, RECALL, Measure, computed
from ragsweep.eval.metric_keys import (
    ACL_LEAKS,
    BY_ORIGIN,
    CASES_WITH_ACL_LEAKS,
    JUDGE,
    JUDGE_BY_TYPE,
    N_ANSWERABLE,
    N_CHUNKS,
    N_PERMISSION,
    PERMISSION_HELD,
    REVOKED_RETRIEVED,
    SUPERSEDED_RETRIEVED,
    access_keys,
    by_type_key,
)
from ragsweep.eval.scoring import Summary
from ragsweep.eval.uncertainty import interval_keys
from ragsweep.tracking.tables import read_table

FIGURES_FILE = "figures.json"
"""Table artifact: every figure of the run (``figure``, ``value``)."""
BY_TYPE_FILE = "by_type.json"
"""Table artifact: per slice (overall, each question type, the weakest) and measure, the
mean, its 95% interval and the number of answerable cases."""
FIGURE_COLUMNS = ("figure", "value")
BY_TYPE_COLUMNS = ("slice", "type", "n", "measure", "mean", "ci_low", "ci_high")
TYPE_SLICE = "type"
"""The ``slice`` of a ``by_type.json`` row for one question type (beside ``overall`` and
``weakest``)."""
ORIGIN_SLICE = "origin"
"""The ``slice`` of a ``by_type.json`` row for the cases of one origin (its name in the
``type`` column: ``hand`` or ``drafted``), when a run scored cases of both."""
ORIGIN_PREFIX = f"{BY_ORIGIN}/"

HEADLINE_FAMILIES = (RECALL, HIT)
"""Families logged at every cut-off and every budget of the run."""
WEAKEST_PREFIX = "by_type_min/"
STAGE_LATENCY_PREFIXES = ("latency_ms_p50/", "latency_ms_p95/")
"""Per-stage search latencies (``latency_ms_p95/rerank``; hybrid and reranking runs)."""
JUDGE_PREFIX = f"{JUDGE}/"
JUDGE_DETAIL_PREFIX = f"{JUDGE_BY_TYPE}/"
LOAD_SECONDS = "load_seconds"
STORE_SECONDS = "store_seconds"
CHUNK_SECONDS = "chunk_seconds"
EMBED_SECONDS = "embed_seconds"
EVAL_SECONDS = "eval_seconds"
ARTIFACTS_SECONDS = "artifacts_seconds"
JUDGE_SECONDS = "judge_seconds"
LOG_SECONDS = "log_seconds"
"""The stages a run times (:class:`ragsweep.run.timer.Timer`), logged as metrics;
``log_seconds`` (logging's own time) is reported, not logged."""

COUNTS: dict[str, str] = {
    "n_cases": "cases of the evaluated split",
    N_ANSWERABLE: "answerable cases (the n of every mean)",
    "n_unanswerable": "unanswerable cases (scored by no retrieval metric)",
    N_CHUNKS: "chunks in the index",
}
TIMINGS: dict[str, str] = {
    LOAD_SECONDS: "seconds to read the corpus and the golden set",
    STORE_SECONDS: "seconds to check and open the tracking store before any work",
    CHUNK_SECONDS: "wall-clock seconds to chunk the corpus (or load the chunks from the cache)",
    EMBED_SECONDS: "seconds to build the indexed texts and the index, chunk embedding included",
    EVAL_SECONDS: "seconds to embed the queries, search and score",
    ARTIFACTS_SECONDS: "seconds to write the run directory",
    JUDGE_SECONDS: "seconds of the judge stage (only with a judge)",
    "latency_ms_p50": "median per-query search time in milliseconds",
    "latency_ms_p95": "95th percentile per-query search time in milliseconds",
}

ACCESS: dict[str, str] = {
    ACL_LEAKS: "retrieved chunks (within the retrieval depth, summed over cases) of documents "
    "the case's principal may not read",
    f"{ACL_LEAKS}_at_<B>c": "the same within each context budget B",
    REVOKED_RETRIEVED: "retrieved chunks of revoked documents",
    SUPERSEDED_RETRIEVED: "retrieved chunks of superseded documents",
    CASES_WITH_ACL_LEAKS: "cases with at least one acl_leaks chunk",
    N_PERMISSION: "permission cases of the evaluated split",
    PERMISSION_HELD: "share of the permission cases with no acl_leaks, with its 95% interval",
}
"""The access figures, logged only for a corpus with access metadata (docs/metrics.md)."""

DOCUMENTED: dict[str, str] = {
    "recall_at_<k>, recall_at_<B>c": "recall at each k of eval.ks and each budget B of "
    "eval.budgets (characters), mean over the answerable cases",
    "hit_at_<k>, hit_at_<B>c": "hit (success) at each k and budget, mean over the answerable cases",
    "mrr": "mean reciprocal rank of the first hit",
    "<objective>": "the run's eval.objective, when it is not one of the above",
    "<measure>_ci_low, <measure>_ci_high": "95% bootstrap interval of each measure above",
    "by_type_min/<measure>": "the lowest per-type mean of each measure above (the weakest "
    "question type)",
    "by_origin/<origin>/<measure>": "each measure above and its interval over the cases of "
    "one origin, hand (written by a person) or drafted (a model's draft a person accepted), "
    "and by_origin/<origin>/n_answerable; only when the run scored cases of both",
    **COUNTS,
    **TIMINGS,
    **ACCESS,
    "latency_ms_p50/<stage>, latency_ms_p95/<stage>": "the same per search stage (sparse, "
    "dense, fusion, rerank), for the runs that have stages",
    "judge/<metric>": "the judge's overall figures (only with a judge; docs/judge.md)",
}
"""Every logged name (as a pattern) and its meaning: the list docs/tracking.md shows."""


def headline_measures(
    ks: Sequence[int], budgets: Sequence[int], objective: str | None = None
) -> list[Measure]:
    """The measures logged as MLflow metrics, in report order, the objective included."""
    names = {
        m.name
        for m in computed(ks, budgets)
        if m.family in HEADLINE_FAMILIES or m.family == MRR or m.name == objective
    }
    return [m for m in computed(ks, budgets) if m.name in names]


def headline_names(
    ks: Sequence[int], budgets: Sequence[int], objective: str | None = None
) -> dict[str, str]:
    """Every MLflow metric name a run with these cut-offs, budgets and objective can log
    (counts and timings included), with its meaning."""
    out: dict[str, str] = {}
    for measure in headline_measures(ks, budgets, objective):
        low, high = interval_keys(measure.name)
        out[measure.name] = measure.definition
        out[low] = f"lower bound of the 95% bootstrap interval of {measure.name}"
        out[high] = f"upper bound of the 95% bootstrap interval of {measure.name}"
        out[WEAKEST_PREFIX + measure.name] = f"lowest per-type mean of {measure.name}"
    access = dict.fromkeys(access_keys(budgets), "access measure (docs/metrics.md)")
    access.update(dict.fromkeys(interval_keys(PERMISSION_HELD), "interval of permission_held"))
    return {**out, **COUNTS, **TIMINGS, **access}


def is_logged(name: str, headline: Mapping[str, str]) -> bool:
    """Whether figure ``name`` is an MLflow metric (``headline``: :func:`headline_names`):
    a by-origin figure is when what follows its origin is (``by_origin/drafted/mrr``)."""
    if name in headline or name.startswith(STAGE_LATENCY_PREFIXES):
        return True
    if name.startswith(ORIGIN_PREFIX):
        return name.split("/", 2)[-1] in headline
    return name.startswith(JUDGE_PREFIX) and not name.startswith(JUDGE_DETAIL_PREFIX)


def split_figures(
    figures: Mapping[str, float], ks: Sequence[int], budgets: Sequence[int], objective: str
) -> dict[str, float]:
    """The figures logged as MLflow metrics (module docstring), in ``figures``' order."""
    headline = headline_names(ks, budgets, objective)
    return {name: value for name, value in figures.items() if is_logged(name, headline)}


def figure_rows(figures: Mapping[str, float]) -> list[list[object]]:
    """The rows of ``figures.json``, sorted by name."""
    return [[name, float(value)] for name, value in sorted(figures.items())]


def read_figures(text: str, source: str) -> dict[str, float]:
    """The figures of a ``figures.json`` text (ValueError naming ``source`` otherwise)."""
    return {str(row["figure"]): float(row["value"]) for row in read_table(text, source)}


def by_type_figures(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The ``by_type/<type>/<measure>`` and ``by_origin/<origin>/<measure>`` figures (mean
    and interval bounds) of the ``type`` and ``origin`` rows of a ``by_type.json`` (rows as
    ``{column: value}``, :data:`BY_TYPE_COLUMNS`): the figures ``figures.json`` leaves out."""
    figures: dict[str, float] = {}
    for row in rows:
        if row["slice"] == TYPE_SLICE:
            name = by_type_key(str(row["type"]), str(row["measure"]))
        elif row["slice"] == ORIGIN_SLICE:
            name = f"{ORIGIN_PREFIX}{row['type']}/{row['measure']}"
        else:
            continue
        low, high = interval_keys(name)
        figures.update({name: row["mean"], low: row["ci_low"], high: row["ci_high"]})
    return {k: float(v) for k, v in figures.items()}


def by_type_rows(summary: Summary) -> list[list[object]]:
    """The rows of ``by_type.json``: overall, each question type (its name as in the golden
    set), the weakest type, then each origin (when there are two), each with every measure
    of the run."""
    rows: list[list[object]] = []
    n_all = summary.counts.get(N_ANSWERABLE, 0)
    slices = [
        ("overall", "", n_all, summary.overall, summary.intervals),
        *(
            (TYPE_SLICE, t, summary.scored_counts.get(t, 0), means, summary.by_type_intervals[t])
            for t, means in summary.by_type.items()
        ),
        ("weakest", "", None, summary.by_type_min, summary.by_type_min_intervals),
        *(
            (ORIGIN_SLICE, o, summary.origin_counts[o], means, summary.by_origin_intervals[o])
            for o, means in summary.by_origin.items()
        ),
    ]
    for slice_name, type_name, n, means, bounds in slices:
        for measure, mean in means.items():
            rows.append(
                [slice_name, type_name, n, measure, mean, bounds[measure].low, bounds[measure].high]
            )
    return rows
