"""Descriptions of a sweep's runs (MLflow's ``mlflow.note.content``, Markdown).

A child's description says, for every axis it took part in (the axis it was launched for,
and later axes it started from as the value to beat), the axis, its value, whether that
value was chosen, the objective and its difference from the chosen value, and links to
the parent run. The parent's names the best child with a link and lists the decision of
each axis: the chosen value, its objective and the runner-up's Δ, changed cases, p and
adjusted p (and, after a search, why its best was adopted or not). Links are the UI's
own addresses (``#/experiments/<id>/runs/<run id>``), relative to the MLflow UI's page.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragsweep.core.terminal import markdown_table
from ragsweep.sweep.paired import PairedDifference, Unpaired
from ragsweep.sweep.report import interval_text, p_text
from ragsweep.sweep.result import AxisResult, SweepResult, Trial
from ragsweep.sweep.spec import SweepSpec


def run_link(experiment_id: str, run_id: str) -> str:
    """The MLflow UI address of a run, relative to the UI's page."""
    return f"#/experiments/{experiment_id}/runs/{run_id}"


def _objective(trial: Trial) -> str:
    return "-" if trial.objective is None else f"{trial.objective:.4f}"


def _versus_chosen(trial: Trial) -> str:
    paired = trial.paired
    if isinstance(paired, PairedDifference):
        adjusted = "" if paired.p_adjusted is None else f", adjusted {p_text(paired.p_adjusted)}"
        return (
            f"; vs the chosen value Δ {paired.delta:+.4f} {interval_text(paired, 4)}, "
            f"+{paired.test.gained}/−{paired.test.lost} cases, "
            f"p = {p_text(paired.p_value)}{adjusted} (n = {paired.n})"
        )
    if isinstance(paired, Unpaired):
        return f"; no paired comparison ({paired.reason})"
    return ""


def _axis_line(number: int, axis_result: AxisResult, index: int) -> str:
    trial = axis_result.trials[index]
    chosen = axis_result.label(axis_result.chosen)
    verdict = "**chosen**" if index == axis_result.chosen else f"not chosen (chosen: `{chosen}`)"
    start = ", the value to beat" if trial.incumbent else ""
    return (
        f"- axis {number}{axis_result.again} `{axis_result.axis.label}` = "
        f"`{trial.point.label}`{start}: "
        f"{verdict}; objective {_objective(trial)}{_versus_chosen(trial)}"
    )


def child_note(
    spec: SweepSpec,
    axes: Sequence[AxisResult],
    run_id: str,
    experiment_id: str,
    parent_run_id: str,
    config_line: str = "",
) -> str:
    """The description of child ``run_id`` after the decided ``axes`` (module docstring);
    ``config_line``: the run's own config summary, kept below."""
    lines = [
        f"Sweep **{spec.name}** ([parent run]({run_link(experiment_id, parent_run_id)})), "
        f"objective `{spec.objective}` ({spec.direction}).",
        "",
    ]
    for axis_result in axes:
        for index, trial in enumerate(axis_result.trials):
            if trial.run_id == run_id:
                lines.append(_axis_line(axis_result.number, axis_result, index))
    if config_line:
        lines += ["", config_line]
    return "\n".join(lines)


def was_chosen(axes: Sequence[AxisResult], run_id: str) -> bool | None:
    """Whether ``run_id``'s value was chosen on the first decided axis it took part in (the
    axis it was launched for); None if it took part in none."""
    for axis_result in axes:
        for index, trial in enumerate(axis_result.trials):
            if trial.run_id == run_id:
                return index == axis_result.chosen
    return None


def _decision_row(number: int, axis_result: AxisResult) -> list[str]:
    best = axis_result.best
    row = [
        f"{number}. {axis_result.axis.label}{axis_result.again}",
        axis_result.label(axis_result.chosen) or "-",
    ]
    row.append("-" if best is None else _objective(best))
    if axis_result.runner_up is None:
        return [*row, "-", "-", "-", "-", "-"]
    runner_up = axis_result.trials[axis_result.runner_up]
    paired = runner_up.paired
    if isinstance(paired, PairedDifference):
        adjusted = "-" if paired.p_adjusted is None else p_text(paired.p_adjusted)
        return [
            *row,
            runner_up.point.label,
            f"{paired.delta:+.4f}",
            f"+{paired.test.gained}/−{paired.test.lost}",
            p_text(paired.p_value),
            adjusted,
        ]
    return [*row, runner_up.point.label, "n/a", "n/a", "n/a", "n/a"]


def parent_note(result: SweepResult, experiment_id: str, best_name: str | None = None) -> str:
    """The parent's description (module docstring): the sweep file's description, the best
    child with a link, and one row per decided axis."""
    spec = result.spec
    lines = [spec.description, ""] if spec.description else []
    final = result.final
    if final is not None and final.run_id:
        label = best_name or final.run_id
        lines.append(
            f"**Best run**: [{label}]({run_link(experiment_id, final.run_id)}) "
            f"(`{final.run_id}`), `{spec.objective}` = {final.objective:.4f}"
        )
        lines.append(f"Reproduce: `ragsweep {' '.join(final.overrides)}`")
    else:
        lines.append("The sweep did not complete: no best run.")
    rows = [_decision_row(a.number, a) for a in result.axes]
    if rows:
        header = [
            "axis",
            "chosen",
            spec.objective,
            "runner-up",
            "Δ runner-up − chosen",
            "+/−",
            "p",
            "p adjusted",
        ]
        cells = [[cell.replace("|", "\\|") for cell in row] for row in rows]
        lines += ["", markdown_table(header, cells)]
    if result.search is not None and result.search.why:
        lines += ["", f"Search ({len(result.search.trials)} trials): {result.search.why}"]
    return "\n".join(lines)
