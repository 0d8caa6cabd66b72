"""Human-readable outputs of a run: ``report.md``, the hit/recall-vs-k plot, and the
one-screen terminal summary. Every mean is shown with its 95% bootstrap interval and every
slice with its number of cases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ragsweep.config.schema import EvalConfig
from ragsweep.core.atomic import write_text_atomic
from ragsweep.core.terminal import MARKDOWN_WIDTH, column_groups, markdown_table, wrap
from ragsweep.eval import measures
from ragsweep.eval.measures import HIT, MRR, RAN_OUT, RECALL, Measure
from ragsweep.eval.metric_keys import (
    ACL_LEAKS,
    CASES_WITH_ACL_LEAKS,
    N_ANSWERABLE,
    N_PERMISSION,
    PERMISSION_HELD,
    REVOKED_RETRIEVED,
    SUPERSEDED_RETRIEVED,
    type_segments,
)
from ragsweep.eval.scoring import Summary
from ragsweep.eval.uncertainty import Bounds
from ragsweep.run.chart import line_chart

TERMINAL_FAMILIES = (HIT, RECALL, MRR)
"""Families the terminal summary shows (all of them are in report.md and MLflow)."""

SUMMARY_GAP = 2
"""Columns between two columns of the terminal summary (a blank rule and one space)."""

ORIGIN_NOTE = (
    "`hand`: cases a person wrote; `drafted`: a model's drafts a person accepted in "
    "`ragsweep label` (docs/golden.md). A gap between them says how far the drafted cases "
    "differ from the hand-written ones."
)

ORIGIN_COLUMN = "origin:"
"""The terminal summary's column of an origin is ``origin:hand``, ``origin:drafted`` (a
question type may be called ``hand``)."""

FACT_LABEL = 12
"""Width of the right-aligned labels of the facts below the summary table."""


def metric_columns(summary: Summary, eval_cfg: EvalConfig) -> list[str]:
    """The summary's metric keys in report order (:func:`ragsweep.eval.measures.computed`: per
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
        f"({summary.counts[N_ANSWERABLE]} answerable, "
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
    if summary.by_origin:
        lines += ["", "## By origin (mean [95% interval])", "", ORIGIN_NOTE, ""]
        lines.append(_by_origin_table(summary, columns))
    unanswerable_types = sorted(set(summary.type_counts) - set(summary.by_type))
    if unanswerable_types:
        lines += [
            "",
            "Types with only unanswerable cases (counted, not scored): "
            + ", ".join(f"{t} ({summary.type_counts[t]})" for t in unanswerable_types),
        ]
    lines += _access_section(summary)
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
    weakest = (
        {"min over types": (summary.by_type_min, summary.by_type_min_intervals)}
        if summary.by_type_min
        else {}
    )
    slices = {
        f"{t} (n={summary.scored_counts[t]})": (means, summary.by_type_intervals[t])
        for t, means in summary.by_type.items()
    }
    return _slice_table({**slices, **weakest}, columns)


def _by_origin_table(summary: Summary, columns: Sequence[str]) -> str:
    """Rows: metrics; columns: all answerable cases, then the cases of each origin."""
    whole = {f"all (n={summary.counts[N_ANSWERABLE]})": (summary.overall, summary.intervals)}
    slices = {
        f"{o} (n={summary.origin_counts[o]})": (means, summary.by_origin_intervals[o])
        for o, means in summary.by_origin.items()
    }
    return _slice_table({**whole, **slices}, columns)


def _slice_table(
    slices: Mapping[str, tuple[Mapping[str, float], Mapping[str, Bounds]]],
    columns: Sequence[str],
) -> str:
    """Rows: metrics; columns: each slice (header → its means and intervals)."""
    rows = [
        [c, *(_cell(means[c], bounds[c]) for means, bounds in slices.values())] for c in columns
    ]
    return markdown_table(["metric", *slices], rows)


def access_lines(summary: Summary) -> list[tuple[bool, str]]:
    """What a run retrieved that it must not have, in words, each with whether it is a
    failure (a leak, a revoked document); empty for a corpus without access metadata."""
    totals = summary.access
    if not totals:
        return []
    leaks, cases = int(totals[ACL_LEAKS]), int(totals[CASES_WITH_ACL_LEAKS])
    lines = [
        (
            True,
            f"LEAK: {leaks} retrieved chunk(s) in {cases} case(s) came from documents the "
            "case's principal may not read (acl_leaks)",
        )
        if leaks
        else (False, "no retrieved chunk came from a document its case's principal may not read")
    ]
    for name, what, failure in (
        (REVOKED_RETRIEVED, "revoked documents", True),
        (SUPERSEDED_RETRIEVED, "superseded documents", False),
    ):
        if totals[name]:
            lines.append(
                (failure, f"{int(totals[name])} retrieved chunk(s) came from {what} ({name})")
            )
    n = int(totals[N_PERMISSION])
    if n:
        held = round(totals[PERMISSION_HELD] * n)
        lines.append((held < n, f"permission cases: {held} of {n} retrieved nothing restricted"))
    return lines


def _access_section(summary: Summary) -> list[str]:
    """``report.md``'s access section: the sentences, then every total and per type."""
    if not summary.access:
        return []
    rows = [
        [
            name,
            _fmt(value),
            summary.access_intervals[name].describe() if name in summary.access_intervals else "",
        ]
        for name, value in summary.access.items()
    ]
    types = list(summary.access_by_type)
    per_type = [
        [name, *(_fmt(summary.access_by_type[t].get(name, 0.0)) for t in types)]
        for name in (ACL_LEAKS, REVOKED_RETRIEVED, SUPERSEDED_RETRIEVED)
    ]
    return [
        "",
        '## Access (docs/metrics.md, "Access measures")',
        "",
        *(f"- {text}" for _, text in access_lines(summary)),
        "",
        markdown_table(["measure", "value", "95% interval"], rows),
        "",
        markdown_tables(["count", *types], per_type),
    ]


def _ran_out_note(summary: Summary, eval_cfg: EvalConfig) -> list[str]:
    """A line for each budget at which some rankings ended before the budget filled."""
    lines = []
    n = summary.counts[N_ANSWERABLE]
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


def markdown_tables(
    header: Sequence[str], rows: Sequence[Sequence[str]], width: int = MARKDOWN_WIDTH
) -> str:
    """:func:`markdown_table`, split into tables over groups of columns when its rows would
    be wider than ``width`` characters; each table repeats the first (label) column and
    tables are separated by a blank line. Cells are never shortened."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    # A row is "|" then " cell |" per column: 3 characters beside each cell.
    groups = column_groups(1 + widths[0] + 3, widths[1:], width, 3)
    tables = [
        markdown_table(
            [header[0], *(header[i + 1] for i in group)],
            [[row[0], *(row[i + 1] for i in group)] for row in rows],
        )
        for group in groups
    ]
    return "\n\n".join(tables)


def plot_at_k(
    summary: Summary, ks: Sequence[int], path: Path, facts: Mapping[str, object] | None = None
) -> None:
    """Line chart of hit@k and recall@k (overall means) against k, saved as SVG, titled
    with what it shows: the measures, the split and the config (hash, chunking,
    preprocessing, model) from the run's ``facts``."""
    series = {
        f"{family}@k": [(k, summary.overall[Measure(family, k=k).name]) for k in ks]
        for family in (HIT, RECALL)
        if all(Measure(family, k=k).name in summary.overall for k in ks)
    }
    n = summary.counts[N_ANSWERABLE]
    chart = line_chart(
        series,
        list(ks),
        (0.0, 1.0),
        "k (retrieved chunks)",
        f"mean over {n} answerable cases",
        plot_title(list(series), facts or {}),
    )
    write_text_atomic(path, chart)


def plot_title(measure_names: Sequence[str], facts: Mapping[str, object]) -> list[str]:
    """Title lines of the run's plot: ``hit@k and recall@k, split tuning, config
    bd9d4a7d7669``, then those of ``facts`` that say what was configured
    (``chunking fixed size=800 overlap=100, preprocess none``, ``model bm25:...``)."""
    first = " and ".join(measure_names) or "no measure at k"
    first += "".join(f", {key} {facts[key]}" for key in ("split", "config") if key in facts)
    lines = [", ".join(f"{k} {facts[k]}" for k in ("chunking", "preprocess") if k in facts)]
    lines.append(f"model {facts['model']}" if "model" in facts else "")
    return [first, *(line for line in lines if line)]


def print_summary(
    summary: Summary, eval_cfg: EvalConfig, facts: Mapping[str, object], console: Console
) -> None:
    """One-screen terminal summary: headline metrics (rows) overall and by question type
    (columns), each mean with its 95% interval beneath it, then the run's facts. Columns
    that do not fit the console's width continue in another table (never cut)."""
    headline = [
        c
        for c in metric_columns(summary, eval_cfg)
        if measures.parse(c).family in TERMINAL_FAMILIES
    ]
    console.print("ragsweep run: mean [95% interval] over answerable cases", markup=False)
    _print_tables(_summary_columns(summary, headline), headline, console)
    _print_facts({**facts, "intervals": summary.bootstrap.describe()}, console)
    unanswerable = summary.counts["n_unanswerable"]
    _print_fact("unanswerable", f"{unanswerable} (counted, not scored)", console)
    for failure, line in access_lines(summary):
        style = "red" if failure else "green"
        console.print(f"  [{style}]access[/{style}] {escape(line)}", soft_wrap=True)
    for line in _depth_warnings(summary):
        first, *rest = wrap(line, console.width, "  warning ", "  ")
        text = escape(first.removeprefix("  warning "))
        console.print(f"  [yellow]warning[/yellow] {text}", soft_wrap=True)
        for text in rest:
            console.print(text, markup=False, soft_wrap=True)


def _summary_columns(summary: Summary, headline: Sequence[str]) -> dict[str, list[str]]:
    """Column name (``all``, each type, then each origin when there are two) → its cells:
    the n, then one stacked cell per headline metric."""
    columns = {
        "all": [str(summary.counts[N_ANSWERABLE])]
        + [_stacked(summary.overall[c], summary.intervals[c]) for c in headline]
    }
    for type_name, means in summary.by_type.items():
        bounds = summary.by_type_intervals[type_name]
        columns[type_name] = [str(summary.scored_counts.get(type_name, 0))] + [
            _stacked(means[c], bounds[c]) for c in headline
        ]
    for origin, means in summary.by_origin.items():
        bounds = summary.by_origin_intervals[origin]
        columns[f"{ORIGIN_COLUMN}{origin}"] = [str(summary.origin_counts[origin])] + [
            _stacked(means[c], bounds[c]) for c in headline
        ]
    return columns


def _print_tables(
    columns: Mapping[str, Sequence[str]], headline: Sequence[str], console: Console
) -> None:
    """The summary's columns in as few tables as fit the console, each with the metric
    names in its first column."""
    names = list(columns)
    labels = ["n answerable", *headline]
    widths = [max(len(name), *(_cell_width(cell) for cell in columns[name])) for name in names]
    first = max(len(label) for label in labels)
    for group in column_groups(first, widths, console.width, SUMMARY_GAP):
        table = _summary_table([names[i] for i in group], [widths[i] for i in group])
        for row, label in enumerate(labels):
            table.add_row(label, *(columns[names[i]][row] for i in group), end_section=row == 0)
        console.print(table)


def _summary_table(names: Sequence[str], widths: Sequence[int]) -> Table:
    """An empty summary table: the metric column, then one right-aligned column per name,
    as wide as its widest cell so no figure is ever shortened."""
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False, show_edge=False)
    table.add_column("metric", no_wrap=True, overflow="fold")
    for index, name in enumerate(names):
        style = "bold" if name == "all" else ""
        table.add_column(
            name, justify="right", style=style, min_width=widths[index], overflow="fold"
        )
    return table


def _print_facts(facts: Mapping[str, object], console: Console) -> None:
    for key, value in facts.items():
        _print_fact(key, str(value), console)


def _print_fact(key: str, value: str, console: Console) -> None:
    """``  key  value``, the key right-aligned and dim, the value wrapped beneath itself."""
    indent = " " * (FACT_LABEL + 4)
    lines = wrap(value, console.width, indent, "")
    label = escape(f"{key:>{FACT_LABEL}}")
    console.print(f"  [dim]{label}[/dim]  {escape(lines[0].lstrip())}", soft_wrap=True)
    for line in lines[1:]:
        console.print(line, markup=False, soft_wrap=True)


def _stacked(value: float, bounds: Bounds) -> str:
    """A terminal cell: the mean, and its interval on the line below."""
    return f"{value:.4f}\n[dim]{escape(bounds.describe(3))}[/dim]"


def _cell_width(cell: str) -> int:
    """Columns of a stacked cell: its widest line, markup not counted."""
    return max(len(Text.from_markup(line).plain) for line in cell.split("\n"))


def job_line(
    job: object, overrides: Sequence[str], objective: str, summary: Summary, run_dir: Path
) -> str:
    """What one job of a sweep or grid prints instead of the summary (``verbose=true``
    prints the summary): ``job 3  chunking.size=800  recall_at_5 = 0.7152 [0.650, 0.780]
    outputs/multirun/2026-05-04/10-00-00/3``, with ``acl_leaks N`` after the figure on a
    corpus with access metadata; ``overrides``: the job's result-affecting overrides."""
    interval = summary.intervals.get(objective)
    figure = f"{objective} = {summary.overall[objective]:.4f}"
    if interval is not None:
        figure += f" {interval.describe(3)}"
    if summary.access:
        figure += f"  {ACL_LEAKS} {summary.access[ACL_LEAKS]:g}"
    return f"job {job}  {' '.join(overrides) or 'defaults'}  {figure}  {_shown_path(run_dir)}"


def _shown_path(path: Path) -> str:
    """``path`` relative to the current directory when below it, else as given."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
