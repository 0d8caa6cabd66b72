"""Search strategies: ``confirm`` repeats passes until one changes nothing, and the family
of the adjustment counts every pass it may make."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from omegaconf import DictConfig

from ragsweep.cli.best import axis_decisions
from ragsweep.eval.scoring import CaseResult
from ragsweep.sweep.notes import parent_note
from ragsweep.sweep.paired import CaseValues, paired_difference
from ragsweep.sweep.report import summary_markdown
from ragsweep.sweep.result import SweepResult
from ragsweep.sweep.spec import load_sweep
from tests.sweep.test_sweep import multirun, unwrapped, write_sweep

# An interaction: heading wins at size 1200, 400 wins with heading, then fixed wins at 400.
OBJECTIVE = {
    ("fixed", 400): 0.70,
    ("fixed", 1200): 0.30,
    ("heading", 400): 0.50,
    ("heading", 1200): 0.35,
}
SWEEP = """\
baseline:
  chunking.size: 1200
axes:
  - chunking.mode: [fixed, heading]
  - chunking.size: [400, 1200]
objective: recall_at_5
min_improvement: 0.01
"""


class Task:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def __call__(self, cfg: DictConfig) -> float:
        self.calls.append((cfg.chunking.mode, cfg.chunking.size))
        return OBJECTIVE[(cfg.chunking.mode, cfg.chunking.size)]


def test_confirm_revisits_an_earlier_axis_until_a_pass_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = Task()
    path = write_sweep(tmp_path, SWEEP + "strategy: confirm\nmax_passes: 4\n", "confirm.yaml")
    result = multirun(task, tmp_path, "confirm", f"sweep={path}", "tracking.enabled=false")
    assert result.final is not None and result.final.objective == 0.70  # fixed, 400
    assert (result.passes, result.stopped) == (3, "pass 3 changed nothing")
    assert [(a.pass_number, a.axis.label, a.best.point.label) for a in result.axes if a.best] == [
        (1, "chunking.mode", "heading"),
        (1, "chunking.size", "400"),
        (2, "chunking.mode", "fixed"),
        (2, "chunking.size", "400"),
        (3, "chunking.mode", "fixed"),
        (3, "chunking.size", "400"),
    ]
    assert len(task.calls) == len(set(task.calls)) == 4  # no configuration runs twice
    saved = yaml.safe_load((tmp_path / "confirm" / "sweep_result.yaml").read_text())
    assert (saved["strategy"], saved["max_passes"], saved["passes"]) == ("confirm", 4, 3)
    assert saved["family_size"] == 4 * 4
    assert len(saved["evaluated"]) == 4 and saved["chosen"]["chunking.mode"] == "fixed"
    assert [a["pass"] for a in saved["axes"]] == [1, 1, 2, 2, 3, 3]
    assert "| 1. chunking.mode (pass 2) | fixed |" in parent_note(result, "0")
    assert "- axis 1 (chunking.mode) (pass 2): hit_at_5 lost" in summary_markdown(with_lost(result))
    decisions = axis_decisions(saved)  # ragsweep best: passes in order, later ones named
    assert decisions[2].startswith("1. chunking.mode (pass 2): fixed")
    out = unwrapped(capsys.readouterr().out)
    assert "2. chunking.size (pass 2)" in out
    assert "strategy confirm: 3 pass(es) over the axes, pass 3 changed nothing" in out


def with_lost(result: SweepResult) -> SweepResult:
    """``result`` with pass 2's first axis' losing value given lost cases by stage (the fake
    task writes no cases, so no value has any)."""
    cases = [
        CaseResult(f"q{i}", "t", "tuning", True, {"recall_at_5": i % 2}, (), 0.0) for i in range(4)
    ]
    one, other = (CaseValues.from_cases(cases[s:] + cases[:s], "recall_at_5", "x") for s in (0, 1))
    paired = paired_difference(one, other, 100, 0, 0.95)
    axis = result.axes[2]
    loser = 1 - (axis.chosen or 0)
    trials = list(axis.trials)
    trials[loser] = replace(trials[loser], paired=replace(paired, lost_by_stage={"ranking": 2}))
    axes = list(result.axes)
    axes[2] = replace(axis, trials=tuple(trials))
    return replace(result, axes=tuple(axes))


def test_strategy_settings_are_checked(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, SWEEP + "strategy: confirn\n")
    with pytest.raises(Exception, match="did you mean 'confirm'"):
        load_sweep(path)
    path = write_sweep(tmp_path, SWEEP + "strategy: confirm\nmax_passes: 0\n")
    with pytest.raises(Exception, match="max_passes"):
        load_sweep(path)
    spec = load_sweep(write_sweep(tmp_path, SWEEP + "max_passes: 5\n"))
    assert (spec.passes, spec.family_size) == (1, 4)  # one_axis makes one pass
    assert spec.params()["sweep.max_passes"] == "1"
    # the default strategy leaves the resume identity of sweeps from before strategies alone
    assert not {"strategy", "max_passes"} & set(spec.plan())
    confirm = load_sweep(write_sweep(tmp_path, SWEEP + "strategy: confirm\n"))
    assert (confirm.plan()["strategy"], confirm.plan()["max_passes"]) == ("confirm", 3)


class BM25Task(Task):
    def __call__(self, cfg: DictConfig) -> float:
        return super().__call__(cfg) if cfg.embedding.backend == "bm25" else 0.0


def test_an_axis_skipped_in_every_pass_is_recorded_once(tmp_path: Path) -> None:
    # pass 1 adopts heading, so pass 2 runs; alpha (a hybrid's key) is skipped in both
    axes = "  - embedding: [bm25, hybrid]\n  - embedding.options.alpha: [0.3, 0.7]\nobjective:"
    sweep = SWEEP.replace("  - chunking.size: [400, 1200]\nobjective:", axes)
    path = write_sweep(tmp_path, sweep + "strategy: confirm\n", "skip.yaml")
    result = multirun(BM25Task(), tmp_path, "skip", f"sweep={path}", "tracking.enabled=false")
    assert (result.passes, result.stopped) == (2, "pass 2 changed nothing")
    saved = yaml.safe_load((tmp_path / "skip" / "sweep_result.yaml").read_text())
    assert [s["number"] for s in saved["skipped"]] == [3]
