"""End-of-sweep outputs: the one-screen terminal table (readable at 80 columns), its
Markdown twin and the plot of the objective per axis value.

Per axis, a header row with the axis, then one row per value: the objective (``mean`` over
the answerable cases), and against the chosen value on the same cases the paired difference
Δ (value − chosen, objective units), the interval from inverting the paired test (coverage
``1 − alpha``), the cases that went up and down (``+/−``), the test's p-value and its
family-wise adjusted p (``p adj``, what decisions use). A p-value of a comparison with too
few changed cases for any test to reach alpha is marked ``†``. A chosen value not
distinguishable from the runner-up (adjusted p > alpha) is marked ``✓*``. A search
(``strategy: optuna``) adds its decision as one more section (the one-axis winner against
the search's best) and a footer line; ``sweep_summary.md`` also lists its trials.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table

from ragsweep.core.terminal import command_lines, markdown_table, wrap
from ragsweep.eval import measures
from ragsweep.eval.attribution import describe_counts, hit_measure
from ragsweep.eval.power import min_discordant
from ragsweep.sweep.factors import MAX_LISTED, describe
from ragsweep.sweep.family import NO_ADJUSTMENT
from ragsweep.sweep.paired import PairedDifference, Unpaired
from ragsweep.sweep.result import (
    RESULT_FILE,
    STATUSES,
    AxisResult,
    SearchPoint,
    SweepResult,
    Trial,
)

INTERVAL = "interval"
RAW_P = "p"
COLUMNS = ("value", "mean", "Δ", INTERVAL, "+/−", RAW_P, "p adj", "note")
"""The columns of ``sweep_summary.md``."""
TERMINAL_COLUMNS = ("value", "mean", "Δ", INTERVAL, "+/−", "p adj", "note")
"""The terminal's one-screen table shows one p-value, the one decisions use (the adjusted
one; the raw one is in ``sweep_summary.md`` and ``sweep_result.yaml``): with both, the
note column had four characters left at 80 columns."""
RIGHT = ("mean", "Δ", "+/−", "p", "p adj")
FIGURES = ("mean", "Δ", INTERVAL, "+/−", "p", "p adj")
"""Columns of figures: never wrapped or shortened."""
FEW = "†"
"""Marks a p-value of a comparison with too few changed cases for any test to reach alpha."""
REPRODUCE = "reproduce: ragsweep "
CHOSEN = "✓"
UNDISTINGUISHED = "✓*"
SUMMARY_FILE = "sweep_summary.md"
"""The table as Markdown (:func:`summary_markdown`), in the sweep's folder."""
PLOT_FILE = "objective_by_axis.png"
"""The plot of the objective per axis value (:func:`plot_objective_by_axis`)."""


def p_text(p: float) -> str:
    """A p-value as shown: three decimals, ``<0.001`` below that."""
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def interval_text(paired: PairedDifference, digits: int = 3) -> str:
    """``[-0.071, +0.010]``; an unbounded end (too few cases) is ``-inf`` / ``+inf``."""
    low, high = paired.interval
    return f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def _paired_cells(trial: Trial, alpha: float) -> list[str]:
    """Δ, interval, +/−, p and adjusted p of ``trial`` against the chosen value ("n/a": no
    paired values)."""
    paired = trial.paired
    if isinstance(paired, PairedDifference):
        test = paired.test
        few = "" if test.can_reject(alpha) else FEW
        adjusted = "" if paired.p_adjusted is None else p_text(paired.p_adjusted)
        return [
            f"{paired.delta:+.3f}",
            interval_text(paired),
            f"+{test.gained}/−{test.lost}",
            p_text(paired.p_value) + few,
            adjusted + (few if adjusted else ""),
        ]
    if isinstance(paired, Unpaired):
        return ["n/a"] * 5
    return [""] * 5


def _note(trial: Trial) -> str:
    """The status, ``start`` for the configuration the axis started from, and ``leak`` for
    one that retrieved what its principals may not read (errors are listed below the
    table)."""
    note = f"{trial.status}, start" if trial.incumbent else trial.status
    return f"{note}, leak" if trial.leaks else note


def _value(axis_result: AxisResult, index: int, stacked: bool = False) -> str:
    """The value's label behind its mark: ``✓`` chosen, ``✓*`` chosen but not
    distinguishable from the runner-up. ``stacked``: a search's configuration one axis
    value a line, under the first (the terminal's table: at 80 columns the joined label
    wrapped wherever the column ended, its second line under the marks)."""
    mark = ""
    if index == axis_result.chosen:
        mark = UNDISTINGUISHED if axis_result.distinguishable is False else CHOSEN
    point = axis_result.trials[index].point
    if stacked and isinstance(point, SearchPoint) and point.values:
        return f"{mark:>2} " + "\n   ".join(point.values)
    return f"{mark:>2} {point.label}"


def table_rows(result: SweepResult, stacked: bool = False) -> list[list[list[str]]]:
    """Per axis, a header row (the axis) then the rows ``[value, mean, Δ, interval, +/−, p,
    p adj, note]`` in trial order (``stacked``: see :func:`_value`)."""
    sections: list[tuple[tuple[int, int], list[list[str]]]] = [
        ((1, s.number), [[f"{s.number}. {s.axis.label}", *[""] * (len(COLUMNS) - 2), "skipped"]])
        for s in result.skipped
    ]
    for order, axis_result in enumerate(result.axes, start=1):
        number = axis_result.number
        multi = " (multi-factor)" if axis_result.other_factors else ""
        again = axis_result.again
        label = f"{number}. {axis_result.axis.label}{multi}{again}"
        rows = [[label, *[""] * (len(COLUMNS) - 1)]]
        for index, trial in enumerate(axis_result.trials):
            objective = "-" if trial.objective is None else f"{trial.objective:.4f}"
            rows.append(
                [
                    _value(axis_result, index, stacked),
                    objective,
                    *_paired_cells(trial, result.spec.alpha),
                    _note(trial),
                ]
            )
        sections.append(((axis_result.pass_number, number if again == "" else order), rows))
    return [rows for _, rows in sorted(sections, key=lambda section: section[0])]


def runner_up_text(axis_result: AxisResult, alpha: float) -> str:
    """``runner-up 800: Δ -0.030 [-0.071, +0.010], +1/−4, p = 0.250 (adjusted 0.750), not
    distinguishable at alpha 0.05`` (empty without a runner-up)."""
    if axis_result.runner_up is None:
        return ""
    trial = axis_result.trials[axis_result.runner_up]
    paired = trial.paired
    if not isinstance(paired, PairedDifference):
        reason = paired.reason if isinstance(paired, Unpaired) else "no paired values"
        return f"runner-up {trial.point.label}: no paired comparison ({reason})"
    verdict = "distinguishable" if axis_result.distinguishable else "not distinguishable"
    adjusted = "" if paired.p_adjusted is None else f" (adjusted {p_text(paired.p_adjusted)})"
    return (
        f"runner-up {trial.point.label}: Δ {paired.delta:+.3f} {interval_text(paired)}, "
        f"+{paired.test.gained}/−{paired.test.lost}, p = {p_text(paired.p_value)}"
        f"{adjusted}, {verdict} at alpha {alpha:g}"
    )


def _title(result: SweepResult) -> list[str]:
    spec = result.spec
    cases = _cases_text(result)
    cases = f", {cases}" if cases else ""
    return [
        f"sweep {spec.name}: {spec.objective} ({spec.direction}){cases}",
        f"decision {spec.decision} (min_improvement {spec.min_improvement:g}, "
        f"alpha {spec.alpha:g}, p adjusted: {spec.adjust} over {spec.family_size} values); "
        "Δ, interval, +/−, p:",
        f"  value − chosen, paired on the same cases; {1 - spec.alpha:.0%} interval of the "
        f"paired sign-flip test ({spec.resamples} resamples, seed {spec.seed})",
    ]


def _footer(result: SweepResult) -> list[str]:
    lines = (
        _undistinguished_lines(result)
        + _few_lines(result)
        + _error_lines(result)
        + _unpaired_lines(result)
        + _attribution_lines(result)
    )
    lines += [f"axis {s.number} ({s.axis.label}) skipped: {s.reason}" for s in result.skipped]
    for axis_result in result.axes:
        if axis_result.other_factors:
            lines.append(
                f"axis {axis_result.number} ({axis_result.axis.label}) also changes (allowed):"
            )
            lines += [f"  {line}" for line in describe(axis_result.other_factors, MAX_LISTED)]
    if result.spec.passes > 1:
        lines.append(
            f"strategy {result.spec.strategy}: {result.passes} pass(es) over the axes, "
            f"{result.stopped}"
        )
    lines += _search_lines(result)
    if result.final is not None:
        lines.append(f"final {result.spec.objective} = {result.final.objective:.4f}")
        lines.append(REPRODUCE + " ".join(result.final.overrides))
    else:
        lines.append("sweep did not complete: no final configuration")
    lines.append(
        f"launched {result.count('new') + result.count('failed')} job(s): "
        f"{result.count('failed')} failed; {result.count('reused')} reused, "
        f"{result.count('resumed')} resumed, {result.count('invalid')} invalid (not launched)"
    )
    if result.parent_run_id:
        lines.append(f"parent run {result.parent_run_id}")
    lines.append(f"results in {result.sweep_dir / RESULT_FILE}")
    return lines


def _search_lines(result: SweepResult) -> list[str]:
    """What the search did and why the final configuration is the one chosen."""
    search = result.search
    if search is None:
        return []
    counts = ", ".join(
        f"{search.count(status)} {status}" for status in STATUSES if search.count(status)
    )
    lines = [
        f"strategy {result.spec.strategy}: one pass, then {len(search.trials)} of "
        f"{result.spec.trials} trial(s) of Optuna's {search.sampler} (seed "
        f"{result.spec.seed}; the pass's {search.told} configuration(s) told first): "
        f"{counts or 'none run'}"
    ]
    return lines + ([f"search: {search.why}"] if search.why else [])


def search_rows(result: SweepResult) -> tuple[list[str], list[list[str]]]:
    """The search's trials as a table: the header (``trial``, each axis, the objective,
    ``status``) and one row per trial (``-``: an axis left out, or no objective)."""
    labels = [axis.label for axis in result.spec.axes]
    header = ["trial", *labels, result.spec.objective, "status"]
    rows = []
    best = None if result.search is None else result.search.best_trial
    for trial in result.search.trials if result.search else ():
        values = dict(trial.values)
        objective = "-" if trial.objective is None else f"{trial.objective:.4f}"
        mark = f"{CHOSEN} " if best is not None and trial.number == best.number else ""
        status = f"{trial.status}, leak" if trial.leaked else trial.status
        rows.append(
            [f"{mark}{trial.number}", *(values.get(a, "-") for a in labels), objective, status]
        )
    return header, rows


def _undistinguished_lines(result: SweepResult) -> list[str]:
    labels = [a.axis.label for a in result.axes if a.distinguishable is False]
    if not labels:
        return []
    return [
        f"{UNDISTINGUISHED} not distinguishable from the runner-up (adjusted p > "
        f"{result.spec.alpha:g}): {', '.join(labels)}"
    ]


def _few_lines(result: SweepResult) -> list[str]:
    """The ``†`` footnote, when a comparison had too few changed cases to ever reject."""
    alpha = result.spec.alpha
    few = [
        t.paired
        for a in result.axes
        for t in a.trials
        if isinstance(t.paired, PairedDifference) and not t.paired.test.can_reject(alpha)
    ]
    if not few:
        return []
    return [
        f"{FEW} too few changed cases for any paired test to reach p <= {alpha:g} (at least "
        f"{min_discordant(alpha)} must change; with m changed the smallest p is 2/2^m): "
        f"{len(few)} comparison(s)"
    ]


def _attribution_lines(result: SweepResult) -> list[str]:
    """Per axis, the cases each value lost against the chosen one on the objective's hit
    measure, by the stage that lost their evidence (:mod:`ragsweep.eval.attribution`)."""
    hit = hit_measure(measures.parse(result.spec.objective))
    lines = []
    for axis_result in result.axes:
        parts = [
            f"{t.point.label}: {describe_counts(t.paired.lost_by_stage)}"
            for t in axis_result.trials
            if isinstance(t.paired, PairedDifference) and t.paired.lost_by_stage
        ]
        if parts and hit is not None and axis_result.best is not None:
            lines.append(
                f"axis {axis_result.number} ({axis_result.axis.label}){axis_result.again}: "
                f"{hit.name} lost against "
                f"{axis_result.best.point.label}, by stage: {'; '.join(parts)}"
            )
    return lines


def _error_lines(result: SweepResult) -> list[str]:
    return [
        f"{t.status} {a.axis.label}={t.point.label}: {_first_line(t.error)}"
        for a in result.axes
        for t in a.trials
        if t.error
    ]


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _unpaired_lines(result: SweepResult) -> list[str]:
    unpaired = [t.paired for a in result.axes for t in a.trials if isinstance(t.paired, Unpaired)]
    if not unpaired:
        return []
    return [f"n/a: no paired comparison for {len(unpaired)} value(s), e.g. {unpaired[0].reason}"]


def _terminal_rows(result: SweepResult) -> list[list[list[str]]]:
    """:func:`table_rows` with one p-value column (:data:`TERMINAL_COLUMNS`): the adjusted
    p, or the raw one where the sweep adjusts nothing; the note's words one a line, so the
    note column is as narrow as its longest word (a wrapped or cut ``reused, start`` read
    ``reus``/``star`` at 80 columns)."""
    raw, adjusted = COLUMNS.index(RAW_P), COLUMNS.index("p adj")
    return [
        [
            [*row[:raw], row[adjusted] or row[raw], *row[adjusted + 1 : -1], _stacked(row[-1])]
            for row in rows
        ]
        for rows in table_rows(result, stacked=True)
    ]


def _stacked(note: str) -> str:
    return note.replace(", ", "\n")


def _widest(sections: list[list[list[str]]], index: int, name: str) -> int:
    """The widest line of a column's cells, axis rows left out (:func:`print_table`)."""
    cells = [row[index] for rows in sections for row in rows[1:]]
    return max([len(name), *(len(line) for cell in cells for line in cell.split("\n"))])


def _terminal_columns(result: SweepResult) -> tuple[str, ...]:
    """:data:`TERMINAL_COLUMNS`, the p column headed ``p`` where the sweep adjusts nothing."""
    if result.spec.adjust != NO_ADJUSTMENT:
        return TERMINAL_COLUMNS
    return tuple(RAW_P if name == "p adj" else name for name in TERMINAL_COLUMNS)


def print_table(result: SweepResult, console: Console) -> None:
    """The one-screen end-of-sweep table (module docstring), its title and footer lines,
    wrapped to the console's width; figures are never cut (the value and note columns
    wrap instead)."""
    for line in _title(result):
        for text in wrap(line, console.width, "", "  "):
            console.print(text, markup=False, soft_wrap=True)
    # One space of padding left of each column but the first, plus the box's blank column
    # rule: columns two spaces apart.
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False, show_edge=False)
    sections = _terminal_rows(result)
    names = _terminal_columns(result)
    widths = [_widest(sections, index, name) for index, name in enumerate(names)]
    spare = console.width - sum(widths) - 2 * (len(names) - 1)
    for index, name in enumerate(names):
        if name in FIGURES:
            justify: JustifyMethod = "right" if name in RIGHT else "left"
            table.add_column(name, justify=justify, no_wrap=True, min_width=widths[index])
        elif name == "value":  # axis labels too, where the screen has room for them
            headers = max(len(rows[0][index]) for rows in sections)
            room = widths[index] + max(spare, 0)
            table.add_column(name, overflow="fold", min_width=min(headers, room, 24))
        else:  # the note's words one a line (_terminal_rows): never cut
            table.add_column(name, no_wrap=True, min_width=widths[index])
    for rows in sections:
        for index, row in enumerate(rows):
            table.add_row(*row, end_section=index == len(rows) - 1)
    console.print(table)
    for line in _footer(result):
        if line.startswith(REPRODUCE):
            texts = command_lines(line, console.width, "  ")
        else:
            texts = wrap(line, console.width, "  ", "    ")
        for text in texts:
            console.print(text, markup=False, soft_wrap=True)


def summary_markdown(result: SweepResult) -> str:
    """``sweep_summary.md``: the terminal table as Markdown, with the title and footer."""
    cells = [
        [cell.replace("|", "\\|") for cell in row] for rows in table_rows(result) for row in rows
    ]
    lines = [
        f"# Sweep {result.spec.name}",
        "",
        result.spec.description,
        "",
        *_title(result),
        "",
        markdown_table(COLUMNS, cells),
        "",
        *(f"- {line}" for line in _footer(result)),
    ]
    if result.search is not None and result.search.trials:
        header, rows = search_rows(result)
        cells = [[cell.replace("|", "\\|") for cell in row] for row in rows]
        lines += [
            "",
            f"## Search trials ({CHOSEN}: the search's best)",
            "",
            markdown_table(header, cells),
        ]
    return "\n".join(lines) + "\n"


def plot_objective_by_axis(result: SweepResult, path: Path) -> Path:
    """One panel per axis: the objective of each value (chosen value highlighted; values
    without an objective marked ×), saved as PNG, titled with the sweep, the objective, the
    split and the final config (:func:`plot_title`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    widths = [max(len(a.trials), 2) for a in result.axes] or [2]
    fig, panels = plt.subplots(
        1,
        len(widths),
        figsize=(max(1.2 + 0.75 * sum(widths), 6.0), 4.2),
        dpi=100,
        sharey=True,
        squeeze=False,
        gridspec_kw={"width_ratios": widths},
    )
    for panel, axis_result in zip(panels[0], result.axes, strict=False):
        _bars(panel, axis_result, axis_result.number)
    panels[0][0].set_ylabel(f"{result.spec.objective} ({_cases_text(result) or 'mean'})")
    fig.suptitle("\n".join(plot_title(result)), fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_title(result: SweepResult) -> list[str]:
    """``sweep chunking: recall_at_2000c by axis value, split tuning`` and ``final config
    f4a9a291f890: recall_at_2000c = 0.7857 (orange: chosen value)``."""
    spec, final = result.spec, result.final
    split = final.config.get("eval", {}).get("split") if final is not None else None
    first = f"sweep {spec.name}: {spec.objective} ({spec.direction}) by axis value"
    first += f", split {split}" if split else ""
    if final is None:
        return [first, "sweep did not complete (orange: chosen value)"]
    return [
        first,
        f"final config {final.config_hash[:12]}: {spec.objective} = {final.objective:.4f} "
        "(orange: chosen value)",
    ]


def _cases_text(result: SweepResult) -> str:
    """``mean over 189 answerable cases`` (a range when the trials differ; empty: no n)."""
    counts = sorted({t.n for a in result.axes for t in a.trials if t.n is not None})
    if not counts:
        return ""
    span = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"mean over {span} answerable cases"


def _bars(panel: Any, axis_result: AxisResult, number: int) -> None:
    trials: Sequence[Trial] = axis_result.trials
    positions = range(len(trials))
    heights = [t.objective or 0.0 for t in trials]
    colors = ["tab:orange" if i == axis_result.chosen else "tab:blue" for i in positions]
    panel.bar(positions, heights, color=colors)
    for i, trial in enumerate(trials):
        text = "×" if trial.objective is None else f"{trial.objective:.3f}"
        panel.annotate(text, (i, heights[i]), ha="center", va="bottom", fontsize=7)
    labels = ["\n".join(text for _, text in t.point.assignments) for t in trials]
    panel.set_xticks(list(positions), labels, fontsize=8)
    panel.set_title(f"{number}. {axis_result.axis.label}", fontsize=9)
    panel.set_xlabel("value", fontsize=8)
    panel.grid(axis="y", alpha=0.3)
