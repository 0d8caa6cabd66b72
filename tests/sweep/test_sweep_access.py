"""A sweep never adopts a configuration that leaked, whatever its objective (issue 30)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ragsweep.eval import measures
from ragsweep.run.objective import RunObjective
from ragsweep.sweep.grid import GridResult, GridRow, grid_markdown
from ragsweep.sweep.paired import CaseValues, Unpaired
from ragsweep.sweep.report import CHOSEN, REPRODUCE, SUMMARY_FILE
from ragsweep.sweep.result import Trial
from ragsweep.sweep.select import Candidate, DecisionSettings, LeakingAxisError, decide
from ragsweep.sweep.spec import Point
from tests.sweep.test_sweep import multirun, real_task, unwrapped, write_sweep

SETTINGS = DecisionSettings(measures.parse("recall_at_5"), "best", 0.01)


def candidate(objective: float, leaks: float) -> Candidate:
    return Candidate(objective, f"c{objective}", CaseValues({"q": objective}, leaks=leaks))


def test_a_leak_is_neither_chosen_nor_the_value_to_beat() -> None:
    start, leaky, clean = candidate(0.5, 3), candidate(0.9, 1), candidate(0.6, 0)
    decision = decide([start, leaky, clean], 0, SETTINGS)
    assert decision.reference == 2 and decision.chosen == 2  # the incumbent leaked too
    assert decide([candidate(0.5, 0), leaky], 0, SETTINGS).chosen == 0
    with pytest.raises(LeakingAxisError, match="never adopts a leak"):
        decide([start, leaky], 0, SETTINGS)


def test_a_leaking_start_is_replaced_by_the_best_clean_value_not_the_first() -> None:
    start, first, better = candidate(0.5, 3), candidate(0.600, 0), candidate(0.605, 0)
    decision = decide([start, first, better], 0, SETTINGS)  # 0.005 < min_improvement
    assert decision.reference == 2 and decision.chosen == 2


def test_the_runner_up_is_never_a_leaking_value() -> None:
    chosen, leaky, clean = candidate(0.8, 0), candidate(0.9, 2), candidate(0.5, 0)
    assert decide([chosen, leaky, clean], 0, SETTINGS).runner_up == 2
    assert decide([chosen, leaky], 0, SETTINGS).runner_up is None


def test_the_access_demo_sweep_never_adopts_its_leaking_start(tmp_path: Path, capsys) -> None:
    result = multirun(real_task, tmp_path, "s1", "sweep=access", "tracking=off")
    (axis,) = result.axes
    objectives = {t.point.label: t.objective for t in axis.trials}
    assert objectives["off"] == objectives["pre"] == objectives["post"]  # filtering costs 0
    assert axis.best.point.label == "pre"  # the start ties but leaked: never adopted
    leaks = {t.point.label: t.leaks for t in axis.trials}
    assert leaks["off"] > 0 and leaks["pre"] == leaks["post"] == 0
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert saved["chosen"] == {"retrieval.acl": "pre"}
    captured = capsys.readouterr()
    out = unwrapped(captured.out + captured.err)
    assert f"never adopted, leaked restricted documents: off (acl_leaks={leaks['off']:g})" in out
    assert "new, start, leak" in (tmp_path / "s1" / SUMMARY_FILE).read_text()  # the note
    assert re.search(r"^ +leak *$", captured.out, re.M)  # the terminal's: a word a line
    assert "LEAK:" in out and "permission cases: 2 of 2 retrieved nothing restricted" in out


def test_a_plain_grid_never_marks_a_leaking_job_best(tmp_path: Path, capsys) -> None:
    overrides = ("corpus=access_demo", "golden=access_demo", "embedding=bm25", "tracking=off")
    multirun(real_task, tmp_path, "g", *overrides, "retrieval.acl=off,pre")
    captured = capsys.readouterr()
    out = unwrapped(captured.out + captured.err)
    assert "best: job 1" in out and "retrieval.acl=off" not in out.split("best: job 1")[1]
    summary = (tmp_path / "g" / "sweep_summary.md").read_text(encoding="utf-8")
    rows = [line for line in summary.splitlines() if "retrieval.acl=" in line]
    assert "✓ 1" in rows[0] and "pre" in rows[0]  # clean first, though the recall ties
    assert "off" in rows[1] and rows[1].rstrip(" |").endswith("leak") and "✓" not in rows[1]


def test_a_grid_where_every_job_leaked_names_no_best(tmp_path: Path) -> None:
    figures = RunObjective(1.0, 0.9, 1.0, 4, acl_leaks=8)
    row = GridRow(0, ("retrieval.acl=off",), "recall_at_5", 1.0, figures, None)
    text = grid_markdown(GridResult((row, replace(row, job=1)), tmp_path))
    assert "no best: every job leaked" in text and "best: job" not in text
    assert REPRODUCE not in text and CHOSEN not in text


ALL_LEAK = """\
baseline: {corpus: access_demo, golden: access_demo, embedding: bm25, retrieval.acl: "off"}
axes:
  - retrieval.acl: ["off"]
objective: recall_at_5
"""


def test_when_every_value_leaks_the_leaks_are_still_recorded(tmp_path: Path, capsys) -> None:
    sweep = write_sweep(tmp_path, ALL_LEAK)
    with pytest.raises(SystemExit):
        multirun(real_task, tmp_path, "s1", f"sweep={sweep}", "tracking=off")
    captured = capsys.readouterr()
    out = unwrapped(captured.out + captured.err)
    assert "never adopted, leaked restricted documents: off (acl_leaks=" in out
    assert "new, start, leak" in (tmp_path / "s1" / "sweep_summary.md").read_text()
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert saved["axes"][0]["trials"][0]["acl_leaks"] > 0


def test_unknown_leaks_on_an_access_corpus_are_not_adoptable() -> None:
    unread = Unpaired("no cases.jsonl")
    start = Candidate(0.5, "a", CaseValues({"q": 0.5}, leaks=0.0), 0.0, access=True)
    logged = Candidate(0.9, "b", unread, 2.0, access=True)  # leaks from its logged metric
    unknown = Candidate(0.9, "c", unread, None, access=True)
    assert decide([start, logged, unknown], 0, SETTINGS).chosen == 0
    assert decide([start, Candidate(0.9, "d", unread, None)], 0, SETTINGS).chosen == 1
    clean = Trial(Point((("retrieval.acl", "pre"),)), "new", 0.5, "a", leaks=0.0)
    assert clean.to_dict()["acl_leaks"] == 0.0
