"""End-of-sweep outputs: the one-screen terminal table, its Markdown twin and the plot of
the objective per axis value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ragsweep.report import markdown_table
from ragsweep.sweep.result import AxisResult, SweepResult, Trial

COLUMNS = ("axis", "value", "objective", "n", "chosen", "note")


def _objective_cell(trial: Trial) -> str:
    return "-" if trial.objective is None else f"{trial.objective:.4f}"


def _note(trial: Trial) -> str:
    parts: list[str] = [trial.status]
    if trial.incumbent:
        parts.append("start")
    if trial.error:
        first_line = trial.error.strip().splitlines()[0] if trial.error.strip() else ""
        parts.append(first_line[:70])
    return ", ".join(parts)


def table_rows(result: SweepResult) -> list[list[list[str]]]:
    """Per axis, the rows ``[axis, value, objective, n, chosen, note]`` in trial order."""
    sections = []
    for axis_result in result.axes:
        rows = []
        for index, trial in enumerate(axis_result.trials):
            rows.append(
                [
                    axis_result.axis.label if index == 0 else "",
                    trial.point.label,
                    _objective_cell(trial),
                    "-" if trial.n is None else str(trial.n),
                    "✓" if index == axis_result.chosen else "",
                    _note(trial),
                ]
            )
        sections.append(rows)
    return sections


def _footer(result: SweepResult) -> list[str]:
    lines = []
    if result.final is not None:
        lines.append(f"final {result.spec.objective} = {result.final.objective:.4f}")
        lines.append("reproduce: ragsweep " + " ".join(result.final.overrides))
    else:
        lines.append("sweep did not complete: no final configuration")
    lines.append(
        f"launched {result.count('new') + result.count('failed')} job(s): "
        f"{result.count('failed')} failed; {result.count('reused')} reused, "
        f"{result.count('resumed')} resumed, {result.count('invalid')} invalid (not launched)"
    )
    if result.parent_run_id:
        lines.append(f"parent run {result.parent_run_id}")
    lines.append(f"results in {result.sweep_dir / 'sweep_result.yaml'}")
    return lines


def print_table(result: SweepResult, console: Console) -> None:
    """The one-screen end-of-sweep table (axis, value, objective, n, chosen, note)."""
    spec = result.spec
    table = Table(
        title=f"sweep {spec.name}: {spec.objective} ({spec.direction}, "
        f"min_improvement {spec.min_improvement:g})",
        title_justify="left",
    )
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in ("objective", "n") else "left")
    for rows in table_rows(result):
        for index, row in enumerate(rows):
            table.add_row(*row, end_section=index == len(rows) - 1)
    console.print(table)
    for line in _footer(result):
        console.print(f"  {line}")


def summary_markdown(result: SweepResult) -> str:
    """``sweep_summary.md``: the terminal table as Markdown, with the footer lines."""
    cells = [
        [cell.replace("|", "\\|") for cell in row] for rows in table_rows(result) for row in rows
    ]
    lines = [
        f"# Sweep {result.spec.name}",
        "",
        result.spec.description,
        "",
        markdown_table(COLUMNS, cells),
        "",
        *(f"- {line}" for line in _footer(result)),
    ]
    return "\n".join(lines) + "\n"


def plot_objective_by_axis(result: SweepResult, path: Path) -> Path:
    """One panel per axis: the objective of each value (chosen value highlighted; values
    without an objective marked ×), saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = [max(len(a.trials), 2) for a in result.axes] or [2]
    fig, panels = plt.subplots(
        1,
        len(widths),
        figsize=(1.2 + 0.75 * sum(widths), 3.6),
        dpi=100,
        sharey=True,
        squeeze=False,
        gridspec_kw={"width_ratios": widths},
    )
    for panel, axis_result in zip(panels[0], result.axes, strict=False):
        _bars(panel, axis_result)
    panels[0][0].set_ylabel(result.spec.objective)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _bars(panel: Any, axis_result: AxisResult) -> None:
    trials = axis_result.trials
    positions = range(len(trials))
    heights = [t.objective or 0.0 for t in trials]
    colors = ["tab:orange" if i == axis_result.chosen else "tab:blue" for i in positions]
    panel.bar(positions, heights, color=colors)
    for i, trial in enumerate(trials):
        text = "×" if trial.objective is None else f"{trial.objective:.3f}"
        panel.annotate(text, (i, heights[i]), ha="center", va="bottom", fontsize=7)
    labels = ["\n".join(text for _, text in t.point.assignments) for t in trials]
    panel.set_xticks(list(positions), labels, fontsize=8)
    panel.set_title(axis_result.axis.label, fontsize=9)
    panel.grid(axis="y", alpha=0.3)
