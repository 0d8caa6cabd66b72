"""Human-readable outputs of a run: ``report.md``, the hit/recall-vs-k plot, and the
one-screen terminal summary. Every mean is shown with its 95% bootstrap interval and every
slice with its number of cases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragsweep import measures
from ragsweep.atomic import write_text_atomic
from ragsweep.config import EvalConfig
from ragsweep.evaluate import Summary
from ragsweep.measures import HIT, MRR, RAN_OUT, RECALL, Measure
from ragsweep.metric_keys import type_segments
from ragsweep.svgchart import line_chart
from ragsweep.uncertainty import Bounds

TERMINAL_FAMILIES = (HIT, RECALL, MRR)
"""Families the terminal summary shows (all of them are in report.md and MLflow)."""


def metric_columns(summary: Summary, eval_cfg: EvalConfig) -> list[str]:
    """The summary's metric keys in report order (:func:`ragsweep.measures.computed`: per
    family, each k, then each budget)."""
    names = (m.name for m in measures.computed(eval_cfg.ks, eval_cfg.budgets))
    return [name for name in names if name in summary.overall]


def render_report(
    summary: Summary, eval_cfg: EvalConfig, title: str, facts: Mapping[str, object]
) -> str:
    """Markdown report: run facts, overall metrics with intervals, and per question type
    each metric with its n and interval."""
    columns = metric_columns(summary, eval_cfg)
    lines = [f"# {title}", ""]
    lines += [f"- **{key}**: {value}" for key, value in facts.items()]
    lines += [
        f"- **cases**: {summary.counts['n_cases']} "
        f"({summary.counts['n_answerable']} answerable, "
        f"{summary.counts['n_unanswerable']} unanswerable: no retrieval metrics)",
        f"- **intervals**: {summary.bootstrap.describe()}",
        "",
        "## Overall (mean over answerable cases)",
        "",
        markdown_table(
            ["metric", "value", "95% interval"],
            [[c, _fmt(summary.overall[c]), summary.intervals[c].describe()] for c in columns],
        ),
    ]
    lines += _ran_out_note(summary, eval_cfg)
    lines += ["", "## By question type (mean [95% interval])", "", _by_type_table(summary, columns)]
    renamed = {t: seg for t, seg in type_segments(summary.type_counts).items() if seg != t}
    if renamed:
        lines += [
            "",
            "MLflow metric keys of types MLflow does not accept as a key: "
            + ", ".join(f"{t} → `by_type/{seg}/…`" for t, seg in renamed.items()),
        ]
    unanswerable_types = sorted(set(summary.type_counts) - set(summary.by_type))
    if unanswerable_types:
        lines += [
            "",
            "Types with only unanswerable cases (counted, not scored): "
            + ", ".join(f"{t} ({summary.type_counts[t]})" for t in unanswerable_types),
        ]
    if summary.extra:
        lines += ["", "## Latency and scores", ""]
        lines.append(
            markdown_table(
                ["measure", "value"], [[k, _fmt(v)] for k, v in sorted(summary.extra.items())]
            )
        )
    return "\n".join(lines) + "\n"


def _by_type_table(summary: Summary, columns: Sequence[str]) -> str:
    """Rows: metrics; columns: each type with its n, then the minimum over types."""
    types = list(summary.by_type)
    header = ["metric", *(f"{t} (n={summary.scored_counts[t]})" for t in types)]
    if summary.by_type_min:
        header.append("min over types")
    rows = []
    for c in columns:
        row = [c]
        row += [_cell(summary.by_type[t][c], summary.by_type_intervals[t][c]) for t in types]
        if summary.by_type_min:
            row.append(_cell(summary.by_type_min[c], summary.by_type_min_intervals[c]))
        rows.append(row)
    return markdown_table(header, rows)


def _ran_out_note(summary: Summary, eval_cfg: EvalConfig) -> list[str]:
    """A line for each budget at which some rankings ended before the budget filled."""
    lines = []
    n = summary.counts["n_answerable"]
    for budget in eval_cfg.budgets:
        name = Measure(RAN_OUT, budget=budget).name
        share = summary.overall.get(name, 0.0)
        if share > 0:
            lines.append(
                f"- the ranking ran out before the {budget}-character budget filled in "
                f"{share:.1%} of {n} answerable cases: their budget metrics count all that "
                f"was retrieved{_depth_part(summary, name)}"
            )
    return ["", *lines] if lines else []


def _depth_part(summary: Summary, name: str) -> str:
    at_depth = summary.ran_out_at_depth.get(name, 0)
    if not at_depth:
        return " (the retriever had no more chunks for them)"
    return (
        f"; {at_depth} of them held the whole retrieval depth (top_k={summary.top_k}), so a "
        "deeper retrieval.top_k could have added chunks"
    )


def _depth_warnings(summary: Summary) -> list[str]:
    """Terminal warnings: budgets that rankings cut at the retrieval depth did not fill."""
    return [
        f"{count} answerable case(s) packed all top_k={summary.top_k} retrieved chunks "
        f"without filling the {measures.parse(name).budget}-character budget: raise "
        "retrieval.top_k for budget metrics that see the whole budget"
        for name, count in summary.ran_out_at_depth.items()
        if count
    ]


def _fmt(value: float) -> str:
    return f"{value:.4f}"


def _cell(value: float, bounds: Bounds) -> str:
    return f"{value:.3f} {bounds.describe(3)}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown (GFM) table; cells are used as given."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


def plot_at_k(summary: Summary, ks: Sequence[int], path: Path) -> None:
    """Line chart of hit@k and recall@k (overall means) against k, saved as SVG."""
    series = {
        f"{family}@k": [(k, summary.overall[Measure(family, k=k).name]) for k in ks]
        for family in (HIT, RECALL)
        if all(Measure(family, k=k).name in summary.overall for k in ks)
    }
    chart = line_chart(
        series, list(ks), (0.0, 1.0), "k (retrieved chunks)", "mean over answerable cases"
    )
    write_text_atomic(path, chart)


def print_summary(
    summary: Summary, eval_cfg: EvalConfig, facts: Mapping[str, object], console: Console
) -> None:
    """One-screen terminal summary: headline metrics (rows) by question type (columns), each
    mean with its 95% interval beneath it."""
    headline = [
        c
        for c in metric_columns(summary, eval_cfg)
        if measures.parse(c).family in TERMINAL_FAMILIES
    ]
    types = list(summary.by_type)
    table = Table(title="ragsweep run (mean [95% interval] over answerable cases)")
    table.title_justify = "left"
    table.add_column("metric", no_wrap=True)
    table.add_column("all", justify="right", style="bold")
    for type_name in types:
        table.add_column(type_name, justify="right")
    table.add_row(
        "n answerable",
        str(summary.counts["n_answerable"]),
        *(str(summary.scored_counts.get(t, 0)) for t in types),
        end_section=True,
    )
    for column in headline:
        by_type = (
            _stacked(summary.by_type[t][column], summary.by_type_intervals[t][column])
            for t in types
        )
        table.add_row(
            column, _stacked(summary.overall[column], summary.intervals[column]), *by_type
        )
    console.print(table)
    for key, value in {**facts, "intervals": summary.bootstrap.describe()}.items():
        console.print(f"  [dim]{key:>12}[/dim]  {value}")
    unanswerable = summary.counts["n_unanswerable"]
    console.print(f"  [dim]{'unanswerable':>12}[/dim]  {unanswerable} (counted, not scored)")
    for line in _depth_warnings(summary):
        console.print(f"  [yellow]warning[/yellow] {escape(line)}")


def _stacked(value: float, bounds: Bounds) -> str:
    """A terminal cell: the mean, and its interval on the line below."""
    return f"{value:.4f}\n[dim]{escape(bounds.describe(3))}[/dim]"
