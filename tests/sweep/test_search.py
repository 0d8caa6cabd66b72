"""``strategy: optuna``: the sweep file's settings, a seeded TPE search after the one-axis
pass through the real sweeper (a fake objective with per-case values, so that the paired
test runs), its decision against the one-axis winner, the bundled demo sweep with an MLflow
store, and resume of an interrupted search."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from ragsweep.check import run_checks
from ragsweep.core import tags as tag
from ragsweep.core.names import CASES_FILE
from ragsweep.eval.scoring import CaseResult
from ragsweep.sweep.report import p_text
from ragsweep.sweep.result import SweepResult
from ragsweep.sweep.search import TpeStudy
from ragsweep.sweep.spec import load_sweep
from tests.sweep.test_sweep import (
    Counter,
    multirun,
    real_task,
    store,
    unwrapped,
    write_sweep,
)

SWEEP = """\
baseline:
  chunking.size: 1200
axes:
  - chunking.mode: [fixed, heading]
  - chunking.size: [400, 1200]
objective: recall_at_5
strategy: optuna
"""
CASES = 40
# Hits out of CASES per configuration: the pass keeps fixed (at 1200), then 1200 (with
# fixed), and never sees heading at 400, which only the search can find.
HITS = {("fixed", 1200): 20, ("heading", 1200): 16, ("fixed", 400): 18}


class CasesTask:
    """A fake objective that writes its cases: configuration ``(mode, size)`` hits the first
    ``hits[(mode, size)]`` cases (so a better configuration gains cases and loses none);
    ``hidden`` is heading at 400's."""

    def __init__(self, hidden: int) -> None:
        self.hits = {**HITS, ("heading", 400): hidden}
        self.calls: list[tuple[str, int]] = []

    def __call__(self, cfg: DictConfig) -> float:
        key = (str(cfg.chunking.mode), int(cfg.chunking.size))
        self.calls.append(key)
        hits = self.hits[key]
        out = Path(HydraConfig.get().runtime.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        rows = [
            CaseResult(f"q{i}", "t", "tuning", True, {"recall_at_5": float(i < hits)}, (), 0.0)
            for i in range(CASES)
        ]
        text = "".join(json.dumps(row.to_json()) + "\n" for row in rows)
        (out / CASES_FILE).write_text(text, encoding="utf-8")
        return hits / CASES


def run_search(tmp_path: Path, task: CasesTask, name: str, extra: str = "trials: 8\n") -> Any:
    path = write_sweep(tmp_path, SWEEP + extra, f"{name}.yaml")
    return multirun(task, tmp_path, name, f"sweep={path}", "tracking.enabled=false")


# -- the sweep file ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (SWEEP.replace("optuna", "optuan"), "did you mean 'optuna'"),
        (SWEEP + "trails: 5\n", "did you mean sweep.trials?"),
        (SWEEP + "trials: 0\n", "sweep.trials=0 must be >= 1"),
        (SWEEP + "trials: many\n", "sweep.trials must be an integer"),
        (
            SWEEP.replace("strategy: optuna\n", "trials: 5\n"),
            "sweep.trials: strategy one_axis makes no search trials; set strategy: optuna",
        ),
        (
            SWEEP.replace("optuna", "confirm") + "trials: 5\n",
            "sweep.trials: strategy confirm makes no search trials",
        ),
    ],
)
def test_search_settings_are_checked(tmp_path: Path, text: str, error: str) -> None:
    with pytest.raises(Exception, match=error.replace("?", r"\?")) as raised:
        load_sweep(write_sweep(tmp_path, text))
    assert str(write_sweep(tmp_path, text)) in str(raised.value)  # names the file


def test_a_bad_search_setting_stops_the_sweep_before_any_job(tmp_path: Path, capsys) -> None:
    task = CasesTask(hidden=36)
    with pytest.raises(SystemExit) as exit_info:
        run_search(tmp_path, task, "bad", "trials: -1\n")
    assert exit_info.value.code == 2
    assert "sweep.trials=-1 must be >= 1" in capsys.readouterr().err
    assert task.calls == [] and not (tmp_path / "bad").exists()


def test_the_search_counts_every_trial_and_is_part_of_the_identity(
    tmp_path: Path,
) -> None:
    spec = load_sweep(write_sweep(tmp_path, SWEEP + "trials: 12\nseed: 3\n"))
    assert (spec.passes, spec.trials, spec.seed, spec.searches) == (1, 12, 3, True)
    assert spec.family_size == 2 + 2 + 12  # the axes' values, and every trial
    assert (spec.plan()["strategy"], spec.plan()["trials"]) == ("optuna", 12)
    assert spec.params()["sweep.trials"] == "12"
    assert load_sweep(write_sweep(tmp_path, SWEEP)).trials == 20  # the default
    one_axis = load_sweep(write_sweep(tmp_path, SWEEP.replace("strategy: optuna\n", "")))
    assert (one_axis.trials, one_axis.family_size, one_axis.searches) == (0, 4, False)
    assert "sweep.trials" not in one_axis.params()


def test_only_a_search_imports_optuna() -> None:
    script = (
        "import sys; import ragsweep.sweep.sweeper, ragsweep.sweep.search; "
        "assert 'optuna' not in sys.modules; "
        "from ragsweep.sweep.search import TpeStudy; TpeStudy((), 'maximize', 0); "
        "assert 'optuna' in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


# -- the search, through the real sweeper -----------------------------------------------------


def test_the_searchs_best_is_adopted_when_significantly_better(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = CasesTask(hidden=36)
    result = run_search(tmp_path, task, "adopt")
    assert isinstance(result, SweepResult) and result.search is not None
    assert result.final is not None and result.final.objective == 36 / CASES
    assert "chunking.mode=heading" in result.final.overrides
    assert "chunking.size=400" in result.final.overrides
    assert len(task.calls) == len(set(task.calls)) == 4  # no configuration runs twice
    assert result.search.adopted and result.search.told == 3  # the pass's, told first
    decision = result.axes[-1]
    assert (decision.axis.label, decision.number, decision.chosen) == ("optuna search", 3, 1)
    winner = decision.trials[0]
    assert winner.incumbent and winner.objective == 20 / CASES
    assert winner.paired is not None and winner.paired.to_dict()["lost"] == 16
    adjusted = winner.paired.to_dict()["p_adjusted"]
    assert adjusted == pytest.approx(12 * winner.paired.to_dict()["p_value"])  # 4 values, 8 trials

    saved = yaml.safe_load((tmp_path / "adopt" / "sweep_result.yaml").read_text())
    assert (saved["strategy"], saved["trials"], saved["seed"]) == ("optuna", 8, 0)
    assert saved["family_size"] == 12 and saved["configurations"] == 4
    assert saved["search"]["outcome"] == "adopted" and saved["search"]["sampler"] == "TPESampler"
    assert saved["search"]["why"].startswith("adopted the search's best (trial ")
    assert f"p <0.001, adjusted {p_text(adjusted)} (alpha 0.05)" in saved["search"]["why"]
    assert len(saved["search"]["trials"]) == 8
    points = {tuple(e["point"].values()) for e in saved["evaluated"]}
    assert points == {("fixed", "1200"), ("heading", "1200"), ("fixed", "400"), ("heading", "400")}
    assert saved["axes"][-1]["axis"] == "optuna search"

    raw = capsys.readouterr().out
    out = unwrapped(raw)
    lines = raw.splitlines()
    (adopted,) = [n for n, line in enumerate(lines) if re.match(r" ✓ heading +0\.\d{4} ", line)]
    assert lines[adopted + 1].startswith("   400 ")  # one axis value a line, under the first
    assert "search: 8 trial(s) of Optuna's TPESampler (seed 0) over the 2 axes at once" in out
    assert "trial 1/8 mode=" in out and "trial 8/8 mode=" in out
    assert "3. optuna search" in out  # the decision's section of the table
    assert "strategy optuna: one pass, then 8 of 8 trial(s)" in out
    summary = (tmp_path / "adopt" / "sweep_summary.md").read_text()
    assert "|  ✓ heading, 400 |" in summary  # the Markdown table keeps the joined label
    assert "## Search trials" in summary and "| trial | chunking.mode | chunking.size |" in summary


def test_a_better_search_result_that_is_not_significant_is_not_adopted(tmp_path: Path) -> None:
    # 22 against 20 hits: two cases gained, none lost; p = 0.5 whatever the adjustment
    result = run_search(tmp_path, CasesTask(hidden=22), "keep", "trials: 8\ndecision: best\n")
    assert result.search is not None and not result.search.adopted
    assert result.final is not None and result.final.objective == 20 / CASES
    best = result.search.best_trial
    assert best is not None and best.objective == 22 / CASES
    assert result.search.why.startswith("kept the one-axis winner (0.5000): the search's best")
    assert "is not significantly better: Δ +0.0500" in result.search.why
    assert "+2/−0, p = 0.500, adjusted 1.000" in result.search.why


def test_an_axis_only_another_value_brings_in_is_left_out_of_a_trial(tmp_path: Path) -> None:
    # embedding.options.alpha exists only with embedding=hybrid (the pass skips it on bm25)
    sweep = (
        "axes:\n  - embedding: [bm25, hybrid]\n  - embedding.options.alpha: [0.3, 0.7]\n"
        "objective: recall_at_5\nstrategy: optuna\ntrials: 6\n"
    )
    path = write_sweep(tmp_path, sweep, "alpha.yaml")
    result = multirun(Backend(), tmp_path, "alpha", f"sweep={path}", "tracking.enabled=false")
    assert result.search is not None and [s.number for s in result.skipped] == [2]
    trials = result.search.trials
    assert {t.status for t in trials} <= {"new", "reused"}  # none invalid
    assert {dict(t.values)["embedding"] for t in trials} == {"bm25", "hybrid"}
    for trial in trials:
        values = dict(trial.values)
        assert ("embedding.options.alpha" in values) == (values["embedding"] == "hybrid")


class Backend:
    """A fake objective by retrieval backend (and the hybrid's weight)."""

    def __call__(self, cfg: DictConfig) -> float:
        if cfg.embedding.backend == "bm25":
            return 0.5
        return 0.4 + float(cfg.embedding.options.alpha) / 10


def test_the_same_seed_asks_the_same_trials(tmp_path: Path) -> None:
    axes = "  - chunking.mode: [fixed, paragraph, heading]\n  - chunking.size: [400, 800, 1200]\n"
    spec = load_sweep(write_sweep(tmp_path, SWEEP.replace(SWEEP[SWEEP.index("  - ") :], axes)))

    def asked(seed: int) -> list[tuple[str, ...]]:
        """15 trials (past the sampler's random start-up) told a fixed objective."""
        study = TpeStudy(spec.axes, spec.direction, seed)
        assert study.tell_known(("fixed", "800"), 0.5) and not study.tell_known(("x", "1"), 0)
        labels = []
        for _ in range(15):
            trial, points = study.ask()
            labels.append(tuple(point.label for point in points))
            study.tell(trial, None if labels[-1] == ("fixed", "400") else len(str(labels)) / 99)
        return labels

    assert asked(0) == asked(0)
    assert asked(0) != asked(1)


# -- the bundled demo sweep, with an MLflow store, interrupted and resumed ---------------------


class InterruptAt:
    """The real task, with Ctrl-C arriving during the ``at``-th job the search launches (a
    job tagged with its search trial)."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.searched = 0

    def __call__(self, cfg: DictConfig) -> float:
        if tag.SEARCH_TRIAL in (cfg.tracking.tags or {}):
            self.searched += 1
            if self.searched == self.at:
                raise KeyboardInterrupt
        return real_task(cfg)


@pytest.mark.slow
def test_the_bundled_search_runs_on_the_demo_resumes_and_logs_its_decisions(
    tmp_path: Path, tracking_db: Path, capsys
) -> None:
    assert [str(p) for p in run_checks(["sweep=chunking_search"]).problems] == []
    with pytest.raises(KeyboardInterrupt):  # during the search's second job
        multirun(InterruptAt(2), tmp_path, "first", "sweep=chunking_search")
    cut = yaml.safe_load((tmp_path / "first" / "sweep_result.yaml").read_text())
    assert not cut["complete"]
    asked = [tuple(t["point"].items()) for t in cut["search"]["trials"]]
    assert [t["status"] for t in cut["search"]["trials"]].count("new") == 1

    counted = Counter(real_task)
    result = multirun(counted, tmp_path, "demo", "sweep=chunking_search")
    assert "resuming sweep chunking_search" in unwrapped(capsys.readouterr().out)
    assert isinstance(result, SweepResult) and result.final is not None
    assert result.search is not None and len(result.search.trials) == 10
    trials = result.search.trials
    assert [t.values for t in trials][: len(asked)] == asked  # the same trials again
    assert {t.status for t in trials[: len(asked)]} == {"resumed"}  # logged: not rerun
    assert all(t.status == "resumed" for a in result.axes[:-1] for t in a.trials)
    assert counted.calls == sum(t.status == "new" for t in trials)

    client, experiment = store(tmp_path)
    runs = client.search_runs(experiment)
    (parent,) = [r for r in runs if r.data.tags.get(tag.SWEEP_ROLE) == tag.PARENT_ROLE]
    children = [r for r in runs if r is not parent]
    hashes = [c.data.tags[tag.CONFIG_HASH] for c in children]
    assert len(hashes) == len(set(hashes)) == result.configurations  # each config once
    assert parent.data.params["sweep.strategy"] == "optuna"
    assert parent.data.params["sweep.trials"] == "10"
    assert parent.data.params["sweep.family_size"] == str(3 + 3 + 3 + 10)
    metrics = parent.data.metrics
    assert metrics["sweep_configurations"] == len(children)
    assert metrics["search_trials"] == 10
    assert metrics["search_adopted"] == float(result.search.adopted)
    for number, axis in enumerate(result.axes, start=1):
        if axis.runner_up is not None:
            assert f"decision/{number}/p_adjusted" in metrics
    searched = [c for c in children if tag.SEARCH_TRIAL in c.data.tags]
    assert searched and all(c.data.tags[tag.AXIS] == "optuna search" for c in searched)
    assert result.search.why in parent.data.tags["mlflow.note.content"]
    saved = yaml.safe_load((tmp_path / "demo" / "sweep_result.yaml").read_text())
    assert len(saved["evaluated"]) == len(children)
    keys = {"chunking.mode", "preprocess", "chunking.size"}
    assert all(set(e["point"]) == keys for e in saved["evaluated"])
    assert saved["search"]["outcome"] in ("kept", "adopted") and saved["search"]["why"]
