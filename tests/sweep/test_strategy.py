"""Search strategies: ``confirm`` repeats passes until one changes nothing, and the family
of the adjustment counts every pass it may make."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import DictConfig

from ragsweep.cli.best import axis_decisions
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
    decisions = axis_decisions(saved)  # ragsweep best: passes in order, later ones named
    assert decisions[2].startswith("1. chunking.mode (pass 2): fixed")
    out = unwrapped(capsys.readouterr().out)
    assert "2. chunking.size (pass 2)" in out
    assert "strategy confirm: 3 pass(es) over the axes, pass 3 changed nothing" in out


def test_strategy_settings_are_checked(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, SWEEP + "strategy: confirn\n")
    with pytest.raises(Exception, match="did you mean 'confirm'"):
        load_sweep(path)
    path = write_sweep(tmp_path, SWEEP + "strategy: confirm\nmax_passes: 0\n")
    with pytest.raises(Exception, match="max_passes"):
        load_sweep(path)
    spec = load_sweep(write_sweep(tmp_path, SWEEP + "max_passes: 5\n"))
    assert (spec.passes, spec.family_size) == (1, 4)  # one_axis makes one pass
    assert spec.plan()["strategy"] == "one_axis" and spec.params()["sweep.max_passes"] == "1"
