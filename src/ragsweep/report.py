"""Human-readable outputs of a run: ``report.md``, the hit/recall-vs-k plot, and the
one-screen terminal summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ragsweep.evaluate import Summary
from ragsweep.metric_keys import type_segments
from ragsweep.svgchart import line_chart

HEADLINE_FAMILIES = ("hit_at", "recall_at", "ndcg_at", "coverage_at")


def metric_columns(summary: Summary, ks: Sequence[int]) -> list[str]:
    """Metric keys in a fixed reading order: per family, each k; then ``mrr``."""
    keys = [f"{family}_{k}" for family in HEADLINE_FAMILIES for k in ks]
    return [k for k in [*keys, "mrr"] if k in summary.overall]


def render_report(
    summary: Summary, ks: Sequence[int], title: str, facts: Mapping[str, object]
) -> str:
    """Markdown report: run facts, overall metrics, and the type × metric matrix."""
    columns = metric_columns(summary, ks)
    lines = [f"# {title}", ""]
    lines += [f"- **{key}**: {value}" for key, value in facts.items()]
    lines += [
        f"- **cases**: {summary.counts['n_cases']} "
        f"({summary.counts['n_answerable']} answerable, "
        f"{summary.counts['n_unanswerable']} unanswerable: no retrieval metrics)",
        "",
        "## Overall (mean over answerable cases)",
        "",
        markdown_table(["metric", "value"], [[c, _fmt(summary.overall[c])] for c in columns]),
        "",
        "## By question type",
        "",
    ]
    rows = [
        [t, str(summary.scored_counts.get(t, 0)), *(_fmt(m[c]) for c in columns)]
        for t, m in summary.by_type.items()
    ]
    if summary.by_type_min:
        rows.append(["**min over types**", "", *(_fmt(summary.by_type_min[c]) for c in columns)])
    lines.append(markdown_table(["type", "n answerable", *columns], rows))
    renamed = {t: s for t, s in type_segments(summary.type_counts).items() if s != t}
    if renamed:
        lines += [
            "",
            "MLflow metric keys of types MLflow does not accept as a key: "
            + ", ".join(f"{t} → `by_type/{s}/…`" for t, s in renamed.items()),
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


def _fmt(value: float) -> str:
    return f"{value:.4f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown (GFM) table; cells are used as given."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


def plot_at_k(summary: Summary, ks: Sequence[int], path: Path) -> None:
    """Line chart of hit@k and recall@k (overall means) against k, saved as SVG."""
    series = {
        family.replace("_at", "@k"): [(k, summary.overall[f"{family}_{k}"]) for k in ks]
        for family in ("hit_at", "recall_at")
        if all(f"{family}_{k}" in summary.overall for k in ks)
    }
    chart = line_chart(
        series, list(ks), (0.0, 1.0), "k (retrieved chunks)", "mean over answerable cases"
    )
    path.write_text(chart, encoding="utf-8")


def print_summary(
    summary: Summary, ks: Sequence[int], facts: Mapping[str, object], console: Console
) -> None:
    """One-screen terminal summary: headline metrics (rows) by question type (columns)."""
    headline = [c for c in metric_columns(summary, ks) if not c.startswith("coverage")]
    types = list(summary.by_type)
    table = Table(title="ragsweep run (mean over answerable cases)", title_justify="left")
    table.add_column("metric")
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
        by_type = (_fmt(summary.by_type[t][column]) for t in types)
        table.add_row(column, _fmt(summary.overall[column]), *by_type)
    console.print(table)
    for key, value in facts.items():
        console.print(f"  [dim]{key:>12}[/dim]  {value}")
    unanswerable = summary.counts["n_unanswerable"]
    console.print(f"  [dim]{'unanswerable':>12}[/dim]  {unanswerable} (counted, not scored)")
