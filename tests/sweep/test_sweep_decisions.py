"""Sweep decisions with a paired test and one factor per axis, through the real one-axis
sweeper in-process (real Hydra composition of conf/, the launcher and, for the decisions,
the real pipeline on a corpus built so that the effect of NFKC is known)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from ragsweep.core import tags as tag
from ragsweep.release.compare import compare_runs
from ragsweep.release.store import RunStore
from ragsweep.sweep.paired import PairedDifference, Unpaired
from tests.sweep.test_sweep import FakeTask, multirun, real_task, store, unwrapped, write_sweep

REPO_SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"

# -- one factor per axis (a fake objective: no pipeline needed) --------------------------------


@pytest.mark.parametrize(
    ("axes", "baseline", "listed"),
    [
        (
            "  - chunking: [fixed, paragraph, heading]\n",
            "",
            [
                # chunking.mode is what the options are; size and overlap are axes of their own
                "axis 1 (chunking) is not one factor: its values also differ in "
                "chunking.overlap, chunking.size:",
                "chunking.overlap = 100 for fixed, heading; 0 for paragraph",
                "chunking.size = 800 for fixed, paragraph; 1200 for heading",
            ],
        ),
        (  # a value key whose change moves another value through an interpolation
            "  - preprocess: [none, nfkc]\n  - chunking.size: [400, 800]\n",
            "baseline:\n  retrieval.top_k: ${chunking.size}\n",
            [
                "axis 2 (chunking.size) is not one factor: its values also differ in "
                "retrieval.top_k:",
                "retrieval.top_k = 400 for 400; 800 for 800",
            ],
        ),
    ],
)
def test_a_multi_factor_axis_is_refused_before_any_job(
    tmp_path: Path, tracking_db: Path, capsys, axes: str, baseline: str, listed: list[str]
) -> None:
    task = FakeTask()
    sweep = write_sweep(tmp_path, baseline + "axes:\n" + axes)
    with pytest.raises(SystemExit) as exit_info:
        multirun(task, tmp_path, "s1", f"sweep={sweep}")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    for line in listed:
        assert line in err
    assert "allow_multi_factor: true" in err  # the way out is named
    assert "in the baseline" in err  # and the fix
    assert len(err.strip().splitlines()) <= 8
    assert task.calls == []
    client = MlflowClient(f"sqlite:///{tracking_db}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    assert client.search_runs(experiments) == []  # not even a parent run


def test_allow_multi_factor_runs_and_records_the_other_factors(
    tmp_path: Path, tracking_db: Path, capsys
) -> None:
    task = FakeTask()
    sweep = write_sweep(
        tmp_path,
        "axes:\n"
        "  - values: {chunking: [fixed, heading]}\n"
        "    allow_multi_factor: true\n"
        "  - preprocess: [none, nfkc_synonyms]\n",
    )
    result = multirun(task, tmp_path, "s1", f"sweep={sweep}")
    expected = {"chunking.size": {"fixed": "800", "heading": "1200"}}
    assert result.axes[0].other_factors == expected
    assert result.axes[1].other_factors == {}  # preprocess options differ in steps only
    assert len(task.calls) == 3

    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert saved["axes"][0]["allow_multi_factor"] is True
    assert saved["axes"][0]["other_factors"] == expected
    out = capsys.readouterr().out
    assert "axis 1/2 chunking (allow_multi_factor) also changes:" in out
    assert "chunking.size = 800 for fixed; 1200 for heading" in out
    assert "1. chunking" in out and "(multi-factor)" in out  # the table's axis row
    summary = (tmp_path / "s1" / "sweep_summary.md").read_text()
    assert "axis 1 (chunking) also changes (allowed):" in summary

    client, experiment = store(tmp_path)
    (parent,) = [r for r in client.search_runs(experiment) if tag.SWEEP_DIGEST in r.data.tags]
    assert parent.data.tags[tag.SWEEP_MULTI_FACTOR] == ("axis 1 (chunking): chunking.size")
    assert parent.data.params["sweep.axis.1"] == "chunking=[fixed, heading] (allow_multi_factor)"


class PrefersLinkedDepth(FakeTask):
    """The fake objective, plus 0.1 when ``retrieval.top_k`` follows ``chunking.size``."""

    def __call__(self, cfg: DictConfig) -> float:
        linked = cfg.retrieval.top_k == cfg.chunking.size
        return super().__call__(cfg) + (0.1 if linked else 0.0)


def test_an_axis_that_becomes_multi_factor_after_a_choice_stops_there(
    tmp_path: Path, capsys
) -> None:
    # On the baseline, chunking.size changes nothing else; once axis 1 links the retrieval
    # depth to it (an interpolation), it does: the check runs again on top of each start.
    task = PrefersLinkedDepth()
    sweep = write_sweep(
        tmp_path,
        "axes:\n  - retrieval.top_k: [10, '${chunking.size}']\n  - chunking.size: [400, 800]\n",
    )
    with pytest.raises(SystemExit) as exit_info:
        multirun(task, tmp_path, "s1", f"sweep={sweep}", "tracking.enabled=false")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "on top of the values chosen so far, axis 2 (chunking.size) is not one factor" in err
    assert "retrieval.top_k = 400 for 400; 800 for 800" in err
    assert len(task.calls) == 3  # axis 1 only: the baseline's top_k (null) and both values
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert saved["complete"] is False
    assert saved["chosen"] == {"retrieval.top_k": "'${chunking.size}'"}


def test_the_demo_sweep_varies_one_factor_per_axis(tmp_path: Path) -> None:
    task = FakeTask()
    result = multirun(
        task, tmp_path, "s1", f"sweep={REPO_SWEEPS / 'chunking.yaml'}", "tracking.enabled=false"
    )
    assert result.final is not None
    assert all(a.other_factors == {} for a in result.axes)
    sizes = {(mode, size, overlap) for mode, _, size, overlap in task.calls[:3]}
    assert sizes == {("fixed", 800, 100), ("paragraph", 800, 100), ("heading", 800, 100)}


class PrefersHybrid(FakeTask):
    """The fake objective, plus 0.1 for a hybrid retriever and alpha/10."""

    def __call__(self, cfg: DictConfig) -> float:
        options = cfg.embedding.options
        bonus = 0.1 + options.alpha / 10 if cfg.embedding.backend == "hybrid" else 0.0
        return super().__call__(cfg) + bonus


RETRIEVER_SWEEP = "axes:\n  - embedding: [bm25, hybrid]\n  - embedding.options.alpha: [0.3, 0.7]\n"


@pytest.mark.parametrize(("task", "chosen"), [(PrefersHybrid(), "hybrid"), (FakeTask(), "bm25")])
def test_a_retriever_axis_is_one_factor_and_an_earlier_choice_brings_its_keys(
    tmp_path: Path, capsys, task: FakeTask, chosen: str
) -> None:
    # The options differ in keys only each has (k1 for bm25, alpha for hybrid): one factor.
    # embedding.options.alpha exists only once hybrid is chosen: composed on the configuration
    # chosen so far, and skipped with a note when that configuration lacks it.
    sweep = write_sweep(tmp_path, RETRIEVER_SWEEP)
    result = multirun(task, tmp_path, "s1", f"sweep={sweep}", "tracking.enabled=false")
    assert result.axes[0].other_factors == {}
    assert result.axes[0].best.point.label == chosen
    out = unwrapped(capsys.readouterr().out)
    if chosen == "hybrid":
        assert [a.best.point.label for a in result.axes] == ["hybrid", "0.7"]
        assert "skipped" not in out
    else:
        assert len(result.axes) == 1
        assert (
            "axis 2/2 embedding.options.alpha: skipped: the configuration chosen so far has "
            "no embedding.options.alpha" in out
        )
        # recorded with its number, in the result and the table
        saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
        assert saved["skipped"] == [
            {
                "number": 2,
                "axis": "embedding.options.alpha",
                "reason": "the configuration chosen so far has no embedding.options.alpha",
            }
        ]
        assert [a["number"] for a in saved["axes"]] == [1]
        assert "2. embedding.options.alpha skipped" in out


# -- decisions without per-case values ----------------------------------------------------------


def test_significant_adopts_nothing_without_per_case_values(tmp_path: Path, capsys) -> None:
    # The fake task writes no cases.jsonl and tracking is off: no paired test is possible,
    # so `significant` keeps the start although heading's objective is far higher.
    sweep = write_sweep(
        tmp_path, "axes:\n  - chunking.mode: [fixed, heading]\ndecision: significant\n"
    )
    result = multirun(FakeTask(), tmp_path, "s1", f"sweep={sweep}", "tracking.enabled=false")
    axis = result.axes[0]
    assert axis.best is not None and axis.best.point.label == "fixed"
    heading = axis.trials[1]
    assert isinstance(heading.paired, Unpaired)
    assert "no cases.jsonl in " in heading.paired.reason
    out = capsys.readouterr().out
    assert "n/a: no paired comparison for 1 value(s)" in out
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert "unavailable" in saved["axes"][0]["trials"][1]["vs_chosen"]


# -- decisions on the real pipeline -------------------------------------------------------------

DISTRACTORS = ("shipping", "billing", "login", "export", "backup", "audit", "travel")


def fullwidth(text: str) -> str:
    """ASCII letters, digits and punctuation as their full-width forms (NFKC folds back)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def nfkc_project(root: Path, n_effect: int, n_control: int) -> list[str]:
    """A corpus and golden set in which NFKC decides exactly ``n_effect`` cases.

    Effect cases ask in ASCII about a document written in full-width letters: without NFKC
    no query token matches it and the seven distractor documents (which share the question's
    common words) fill the top 5; with NFKC its unique term ranks it first. Control cases
    are ASCII on both sides and found either way. Returns the overrides pointing there.
    """
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    for word in DISTRACTORS:
        (corpus / f"{word}.md").write_text(f"# {word}\n\nThe {word} procedure does need a form.\n")
    rows = []
    for kind, count in (("effect", n_effect), ("control", n_control)):
        for i in range(count):
            term = f"zq{chr(ord('a') + i)}{kind}vex"
            sentence = f"The {term} procedure needs a signed form."
            text = fullwidth(sentence) if kind == "effect" else sentence
            (corpus / f"{kind}{i}.md").write_text(f"# {kind} {i}\n\n{text}\n", encoding="utf-8")
            rows.append(
                {
                    "id": f"{kind}{i}",
                    "question": f"What does the {term} procedure need?",
                    "type": kind,
                    "split": "tuning",
                    "evidence": [{"doc": f"{kind}{i}.md", "quote": text}],
                }
            )
    golden = root / "golden.jsonl"
    golden.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return [f"corpus.path={corpus}", f"golden.path={golden}"]


def nfkc_sweep(tmp_path: Path, decision: str, extra: str = "") -> Path:
    return write_sweep(
        tmp_path,
        "axes:\n  - preprocess: [none, nfkc]\nobjective: recall_at_5\n"
        f"min_improvement: 0.01\ndecision: {decision}\n{extra}",
        f"{decision}.yaml",
    )


@pytest.mark.slow
def test_significant_keeps_the_start_on_a_gain_of_two_cases(tmp_path: Path, capsys) -> None:
    project = nfkc_project(tmp_path / "weak", n_effect=2, n_control=10)  # +2/12, p = 0.5
    off = "tracking.enabled=false"  # per-case values from the jobs' run directories
    best = multirun(
        real_task, tmp_path, "best", f"sweep={nfkc_sweep(tmp_path, 'best')}", off, *project
    )
    significant = multirun(
        real_task, tmp_path, "sig", f"sweep={nfkc_sweep(tmp_path, 'significant')}", off, *project
    )
    for result, chosen in ((best, "nfkc"), (significant, "none")):
        axis = result.axes[0]
        assert axis.best is not None and axis.best.point.label == chosen
        assert [t.objective for t in axis.trials] == pytest.approx([10 / 12, 1.0])
        assert [t.n for t in axis.trials] == [12, 12]  # from the cases, without tracking
        assert axis.distinguishable is False
        other = axis.trials[axis.runner_up or 0].paired
        assert isinstance(other, PairedDifference)
        assert other.p_value == pytest.approx(0.5)  # exact: 2 non-zero differences
        assert other.delta == pytest.approx(2 / 12 if chosen == "none" else -2 / 12)
    out = capsys.readouterr().out
    assert "✓* none" in out and "✓* nfkc" in out
    assert "not distinguishable from the runner-up (adjusted p > 0.05): preprocess" in out
    # the table's rows (value rows are indented three columns; wrapped lines below the
    # table continue further in, and may hold a path wider than the terminal)
    table = [line for line in out.splitlines() if re.match(r"value |   \S|✓", line)]
    assert table and all(len(line) <= 80 for line in table)


@pytest.mark.slow
def test_significant_adopts_a_clear_gain_with_the_stats_of_ragsweep_compare(
    tmp_path: Path, tracking_db: Path
) -> None:
    project = nfkc_project(tmp_path / "strong", n_effect=8, n_control=4)
    # 2^8 sign assignments > 100 resamples: the seeded random test, as in ragsweep-compare
    sweep = nfkc_sweep(tmp_path, "significant", "resamples: 100\nseed: 4\n")
    result = multirun(real_task, tmp_path, "s1", f"sweep={sweep}", *project)
    axis = result.axes[0]
    assert axis.best is not None and axis.best.point.label == "nfkc"
    assert axis.distinguishable is True
    none = axis.trials[0]
    assert isinstance(none.paired, PairedDifference) and not none.paired.test.exact
    assert none.paired.delta == pytest.approx(-8 / 12)

    compared = compare_runs(
        RunStore(f"sqlite:///{tracking_db}"),
        baseline_id=str(axis.best.run_id),
        candidate_id=str(none.run_id),
        metric="recall_at_5",
        resamples=100,
        seed=4,
    )
    assert compared.test == none.paired.test  # same differences, order, resamples and seed
    assert compared.test.p_value < 0.05 and compared.verdict == "reject"
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    paired = saved["axes"][0]["trials"][0]["vs_chosen"]
    assert paired["p_value"] == compared.test.p_value
    assert paired["delta"] == pytest.approx(compared.test.mean_difference)
    assert paired["sign_assignments"] == 100 and saved["seed"] == 4
    assert (paired["gained"], paired["lost"]) == (0, 8)
    assert paired["p_adjusted"] >= paired["p_value"] and saved["adjust"] == "holm"
    _low, high = paired["interval"]
    assert (high < 0) == (paired["p_value"] <= 1 - paired["interval_level"])
    assert saved["decision"] == "significant" and saved["axes"][0]["distinguishable"] is True
