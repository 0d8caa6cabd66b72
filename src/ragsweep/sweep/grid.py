"""The table that ends a plain grid (``ragsweep -m a=1,2 b=3,4``, no sweep file).

One row per configuration, best first: the job number, the overrides that differ between
the jobs, the objective (``eval.objective``, the default objective of sweeps) with its 95%
bootstrap interval. A grid ranks; it does not decide: no paired test is made (a sweep file
does that, docs/sweeps.md). The same table is written to ``sweep_summary.md`` in the grid's
folder.

Each figure is the job's own: the objective and interval the job returned with its objective,
from the summary its ``report.md`` shows (:mod:`ragsweep.run.objective`); for a job that
returned none, recomputed from its ``cases.jsonl`` and ``config.yaml`` with the run's
bootstrap settings (:func:`run_objective`), which gives the same figures.

On a corpus with access metadata a job that retrieved chunks its cases' principals may not
read (``acl_leaks`` > 0, from its ``cases.jsonl``) is ranked after every clean one, noted
``leak``, and never marked best nor given a reproduce line, as a sweep never adopts one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich import box
from rich.console import Console
from rich.table import Table

from ragsweep.core.errors import ConfigError
from ragsweep.core.names import CASES_FILE, NOT_REPRODUCED
from ragsweep.core.terminal import command_lines, markdown_table, wrap
from ragsweep.eval import measures
from ragsweep.eval.scoring import cases_from_jsonl, summarize
from ragsweep.run.config import RunConfig
from ragsweep.run.objective import RunObjective, returned_figures
from ragsweep.sweep.paired import INTERVAL_LEVEL
from ragsweep.sweep.report import CHOSEN, REPRODUCE, SUMMARY_FILE

RUN_CONFIG_FILE = "config.yaml"
"""The resolved config a run wrote into its folder."""
GRID_COLUMNS = ("job", "configuration", "mean", f"{INTERVAL_LEVEL:.0%} interval", "n")
NOTE_COLUMN = "note"
"""Added to the table only when a job leaked."""
LEAK_NOTE = "leak"


def run_objective(run_dir: Path, objective: str) -> RunObjective | None:
    """``objective`` of the run in ``run_dir`` as its report shows it, recomputed from its
    ``cases.jsonl`` and ``config.yaml`` (same bootstrap resamples and seed); None when the
    folder lacks them or they do not give that objective."""
    config_path, cases_path = run_dir / RUN_CONFIG_FILE, run_dir / CASES_FILE
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        cases = cases_from_jsonl(cases_path.read_text(encoding="utf-8"), str(cases_path))
        run_cfg = RunConfig.from_container(config)
    except (OSError, ValueError, ConfigError, AttributeError, TypeError):
        return None
    return RunObjective.of(summarize(cases, run_cfg.eval, run_cfg.top_k), objective)


@dataclass(frozen=True)
class GridRow:
    """One job of a grid: its number, its overrides, its objective (None: not readable),
    its folder."""

    job: int
    overrides: tuple[str, ...]
    objective: str
    value: float
    figures: RunObjective | None
    run_dir: Path | None

    @property
    def leaked(self) -> bool:
        """Whether its cases retrieved chunks their principals may not read."""
        leaks = self.figures.acl_leaks if self.figures is not None else None
        return bool(leaks)


@dataclass(frozen=True)
class GridResult:
    """A finished grid: its rows best first (leaking rows last), and its folder."""

    rows: tuple[GridRow, ...]
    sweep_dir: Path

    @property
    def best(self) -> GridRow | None:
        """The first row that did not leak (None: every row leaked)."""
        return next((row for row in self.rows if not row.leaked), None)

    @property
    def columns(self) -> tuple[str, ...]:
        leaked = any(row.leaked for row in self.rows)
        return (*GRID_COLUMNS, NOTE_COLUMN) if leaked else GRID_COLUMNS

    @property
    def objectives(self) -> list[str]:
        return sorted({row.objective for row in self.rows})

    @property
    def varied(self) -> list[str]:
        """The override keys whose value differs between the jobs, in command-line order."""
        values: dict[str, set[str]] = {}
        for row in self.rows:
            for line in row.overrides:
                key, _, value = line.partition("=")
                values.setdefault(key, set()).add(value)
        return [k for k, v in values.items() if len(v) > 1 or len(self.rows) == 1]


def grid_rows(returns: Sequence[Any], default_objective: str) -> list[GridRow]:
    """The rows of the grid's job returns (Hydra ``JobReturn``s), best first, the rows that
    leaked after every clean one."""
    rows = [_row(index, ret, default_objective) for index, ret in enumerate(returns)]
    maximize = _direction(rows[0].objective if rows else default_objective) == "maximize"
    return sorted(rows, key=lambda r: (r.leaked, -r.value if maximize else r.value, r.job))


def _row(index: int, ret: Any, default_objective: str) -> GridRow:
    hydra_cfg = ret.hydra_cfg.hydra if ret.hydra_cfg is not None else None
    job = int(hydra_cfg.job.num) if hydra_cfg is not None else index
    run_dir = Path(str(hydra_cfg.runtime.output_dir)) if hydra_cfg is not None else None
    objective = default_objective
    if ret.cfg is not None and "eval" in ret.cfg:
        objective = str(ret.cfg.eval.get("objective", default_objective))
    figures = returned_figures(ret.return_value, objective)
    if figures is None and run_dir is not None:
        figures = run_objective(run_dir, objective)
    overrides = tuple(
        line for line in ret.overrides or () if line.partition("=")[0] not in NOT_REPRODUCED
    )
    return GridRow(job, overrides, objective, float(ret.return_value), figures, run_dir)


def _direction(objective: str) -> str:
    try:
        return measures.parse(objective).direction
    except ConfigError:
        return "maximize"


def _label(row: GridRow, varied: Sequence[str]) -> str:
    lines = [line for line in row.overrides if line.partition("=")[0] in varied]
    return " ".join(lines) or "defaults"


def grid_table_rows(result: GridResult) -> list[list[str]]:
    """``[job, configuration, mean, interval, n]`` per row, the best clean one marked ``✓``,
    and ``note`` (``leak``) when a row leaked."""
    varied, best, noted = result.varied, result.best, NOTE_COLUMN in result.columns
    cells = []
    for row in result.rows:
        mark = CHOSEN if row is best else " "
        figures = row.figures
        line = [
            f"{mark} {row.job}",
            _label(row, varied),
            f"{row.value:.4f}",
            figures.interval_text() if figures else "n/a",
            str(figures.n) if figures else "",
        ]
        cells.append([*line, LEAK_NOTE if row.leaked else ""] if noted else line)
    return cells


def _title(result: GridResult) -> list[str]:
    objectives = result.objectives
    objective = objectives[0] if len(objectives) == 1 else " / ".join(objectives)
    lines = [
        f"grid of {len(result.rows)} configuration(s): {objective} "
        f"({_direction(objectives[0])}; eval.objective, the default objective of sweeps), "
        "mean over the answerable cases, best first",
    ]
    if len(objectives) > 1:
        lines.append("the jobs used different objectives (eval.objective): not comparable")
    return lines


def _footer(result: GridResult) -> list[str]:
    best = result.best
    first = best or result.rows[0]
    fixed = [line for line in first.overrides if line.partition("=")[0] not in result.varied]
    lines = [f"every job also ran with: {' '.join(fixed)}"] if fixed else []
    if any(row.leaked for row in result.rows):
        lines.append(
            "leak: retrieved chunks its cases' principals may not read (acl_leaks > 0); "
            "never marked best (docs/sweeps.md)"
        )
    if best is None:
        lines.append(
            "no best: every job leaked restricted documents; use retrieval.acl=pre or post"
        )
    else:
        lines += [
            f"best: job {best.job}, {best.objective} = {best.value:.4f}; no paired test "
            "between the rows (a sweep file decides with one: docs/sweeps.md)",
            REPRODUCE + " ".join(best.overrides),
        ]
    lines.append(
        f"results in {result.sweep_dir / SUMMARY_FILE} (each job's in {result.sweep_dir}/<job>)"
    )
    return lines


def print_grid_table(result: GridResult, console: Console) -> None:
    """The end-of-grid table (module docstring) with its title and footer lines, wrapped
    to the console's width."""
    for line in _title(result):
        for text in wrap(line, console.width, "", "  "):
            console.print(text, markup=False, soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), pad_edge=False, show_edge=False)
    for name in result.columns:
        if name == "configuration":
            table.add_column(name, overflow="fold")
        else:
            table.add_column(name, justify="left" if name != "mean" else "right", no_wrap=True)
    for cells in grid_table_rows(result):
        table.add_row(*cells)
    console.print(table)
    for line in _footer(result):
        if line.startswith(REPRODUCE):
            texts = command_lines(line, console.width, "  ")
        else:
            texts = wrap(line, console.width, "  ", "    ")
        for text in texts:
            console.print(text, markup=False, soft_wrap=True)


def grid_markdown(result: GridResult) -> str:
    """``sweep_summary.md`` of a grid: the terminal table as Markdown, title and footer."""
    cells = [[cell.replace("|", "\\|") for cell in row] for row in grid_table_rows(result)]
    lines = [
        "# Grid",
        "",
        *_title(result),
        "",
        markdown_table(result.columns, cells),
        "",
        *(f"- {line}" for line in _footer(result)),
    ]
    return "\n".join(lines) + "\n"


def conclude_grid(
    returns: Sequence[Any], default_objective: str, sweep_dir: Path, console: Console
) -> GridResult | None:
    """Print the grid's table and write it to ``sweep_dir/sweep_summary.md`` (nothing
    without a job)."""
    rows = grid_rows(returns, default_objective)
    if not rows:
        return None
    result = GridResult(tuple(rows), sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / SUMMARY_FILE).write_text(grid_markdown(result), encoding="utf-8")
    print_grid_table(result, console)
    return result
