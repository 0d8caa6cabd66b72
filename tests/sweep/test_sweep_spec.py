"""Sweep files and the choice of an axis' value (pure functions, no Hydra run)."""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from ragsweep.eval import measures
from ragsweep.sweep.lines import message_parts
from ragsweep.sweep.paired import CaseValues, PairedDifference, Unpaired
from ragsweep.sweep.select import (
    Candidate,
    DecisionSettings,
    NoObjectiveError,
    choose,
    decide,
    reference_index,
)
from ragsweep.sweep.spec import (
    Axis,
    SweepFileError,
    load_sweep,
    override_text,
    resolve_sweep_path,
)

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_bundled_sweep_files_load() -> None:
    chunking = load_sweep(REPO / "sweeps" / "chunking.yaml")
    assert chunking.name == "chunking"
    assert [a.keys for a in chunking.axes] == [
        ("chunking.mode",),
        ("preprocess",),
        ("chunking.size",),
        ("chunking.overlap",),
    ]
    assert chunking.axes[2].values == (("400", "800", "1200"),)
    assert (chunking.objective, chunking.direction) == ("recall_at_2000c", "maximize")
    assert chunking.min_improvement == 0.01
    assert (chunking.decision, chunking.alpha) == ("significant", 0.05)
    assert dict(chunking.baseline) == {
        "embedding": "bm25",
        "chunking.size": "800",
        "chunking.overlap": "100",
        "retrieval.top_k": "40",
    }
    grid = load_sweep(REPO / "sweeps" / "grid_small.yaml")
    assert [p.label for p in grid.axes[0].points()] == [
        "chunking.size=400 preprocess=none",
        "chunking.size=400 preprocess=nfkc",
        "chunking.size=800 preprocess=none",
        "chunking.size=800 preprocess=nfkc",
    ]


def test_defaults_and_baseline_text(tmp_path: Path) -> None:
    spec = load_sweep(
        write(
            tmp_path,
            "baseline: {embedding: bm25, chunking.size: 600, retrieval.respect_scope: false,"
            " +tracking.tags.team: search}\n"
            "axes:\n  - preprocess: [none, nfkc]\n",
        )
    )
    assert spec.objective == "recall_at_5" and spec.direction == "maximize"
    assert spec.min_improvement == 0.0
    assert dict(spec.baseline) == {
        "embedding": "bm25",
        "chunking.size": "600",
        "retrieval.respect_scope": "false",
        "+tracking.tags.team": "search",
    }
    assert spec.params()["sweep.baseline.tracking.tags.team"] == "search"  # no "+" in a key


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("axes: []\n", "at least one axis"),
        ("objective: mrr\n", r"sweep\.axes is required"),
        ("axes:\n  - chunking: fixed\n", r"axes\[0\]\.chunking must be a non-empty list"),
        ("axes:\n  - [fixed, heading]\n", r"axes\[0\] must be a mapping"),
        ("axes:\n  - chunking.size: [400, 400]\n", "lists a value twice"),
        ("axes:\n  - chunking.size: [[1, 2]]\n", "not a single value"),
        ("axes:\n  - corpus.path: [a, b]\n", "cannot be an axis"),
        ("axes:\n  - eval.min_span_overlap: [0.5, 1.0]\n", "cannot be an axis"),
        ("axes:\n  - tracking.experiment: [a, b]\n", "cannot be an axis"),
        ("axes:\n  - cache.enabled: [true, false]\n", "cannot be an axis"),
        ("axes:\n  - chunking: [fixed]\ndirection: up\n", "sweep.direction='up' is not one of"),
        ("axes:\n  - chunking: [fixed]\nmin_improvement: -1\n", "must be >= 0"),
        ("axes:\n  - chunking: [fixed]\nbaseline: {eval.objective: mrr}\n", "set by the sweeper"),
        (
            "axes:\n  - chunking: [fixed]\nbaseline: {hydra/launcher: joblib}\n",
            "set by the sweeper",
        ),
        ("axes:\n  - chunking: [fixed]\naxis: []\n", "did you mean sweep.axes"),
        ("- just a list\n", "is a mapping"),
    ],
)
def test_invalid_sweep_files_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SweepFileError, match=message) as info:
        load_sweep(path)
    assert str(path) in str(info.value)


def test_resolve_sweep_path(tmp_path: Path) -> None:
    write(tmp_path, "axes: [{chunking: [fixed]}]\n", "mine.yaml")
    assert resolve_sweep_path("mine", [tmp_path]) == (tmp_path / "mine.yaml").resolve()
    other = write(tmp_path, "axes: [{chunking: [fixed]}]\n", "elsewhere.yaml")
    assert resolve_sweep_path(str(other), [tmp_path / "nowhere"]) == other.resolve()
    with pytest.raises(SweepFileError, match=r"sweep=mien: no sweep file .* mine.*'mine'\?"):
        resolve_sweep_path("mien", [tmp_path])


def test_sweep_names_are_looked_up_in_order(tmp_path: Path) -> None:
    """The project's sweeps/ first, then the bundled ones (ragsweep.config.app.sweep_dirs)."""
    project, bundled = tmp_path / "project", tmp_path / "bundled"
    project.mkdir()
    bundled.mkdir()
    write(project, "axes: [{chunking: [fixed]}]\n", "chunking.yaml")
    write(bundled, "axes: [{chunking: [heading]}]\n", "chunking.yaml")
    write(bundled, "axes: [{chunking: [paragraph]}]\n", "other.yaml")
    dirs = [project, bundled]
    assert resolve_sweep_path("chunking", dirs) == (project / "chunking.yaml").resolve()
    assert resolve_sweep_path("other", dirs) == (bundled / "other.yaml").resolve()
    with pytest.raises(SweepFileError, match=r"\(sweeps: chunking, other\)"):
        resolve_sweep_path("none", dirs)


@pytest.mark.parametrize(
    "value",
    [
        "fixed",
        "nfkc_synonyms",
        "400",
        "true",
        "null",
        "a b,c",
        "it's",
        "C:\\dir\\",
        "x\\'y",
        "",
        400,
        0.25,
        False,
        None,
    ],
)
def test_override_text_round_trips_through_hydra(value: object) -> None:
    parsed = OverridesParser.create().parse_override("key=" + override_text(value))
    assert parsed.value() == value
    assert type(parsed.value()) is type(value)


def test_axis_points_are_the_grid_in_file_order() -> None:
    axis = Axis(keys=("a", "b"), values=(("1", "2"), ("x", "y", "z")))
    points = axis.points()
    assert len(points) == 6
    assert points[0].assignments == (("a", "1"), ("b", "x"))
    assert points[-1].assignments == (("a", "2"), ("b", "z"))
    assert Axis(keys=("a",), values=(("1", "2"),)).points()[1].label == "2"


@pytest.mark.parametrize(
    ("objectives", "incumbent", "expected"),
    [
        ([0.5, 0.6, None], 0, 0),  # the incumbent has an objective: it is the reference
        ([None, 0.6, 0.7], 0, 1),  # the incumbent failed: first value with an objective
        ([0.4, 0.6], None, 0),  # no incumbent among the values: the first listed
    ],
)
def test_reference_index(objectives: list[float | None], incumbent: int | None, expected: int):
    assert reference_index(objectives, incumbent) == expected


def test_reference_index_without_any_objective() -> None:
    with pytest.raises(NoObjectiveError):
        reference_index([None, None], 0)


@pytest.mark.parametrize(
    ("objectives", "reference", "min_improvement", "expected"),
    [
        ([0.50, 0.505, 0.45], 0, 0.01, 0),  # +0.005 is within min_improvement
        ([0.50, 0.52, 0.53], 0, 0.01, 2),  # both qualify: the best wins
        ([0.50, 0.53, 0.53], 0, 0.01, 1),  # an exact tie: the first listed
        ([0.50, 0.51], 0, 0.01, 0),  # exactly min_improvement is not "more"
        ([0.40, 0.50, 0.30], 1, 0.0, 1),  # the reference need not be first
        ([0.50, None, 0.60], 0, 0.0, 2),  # failed values are never chosen
    ],
)
def test_choose(
    objectives: list[float | None],
    reference: int,
    min_improvement: float,
    expected: int,
) -> None:
    recall = measures.parse("recall_at_5")
    assert choose(objectives, reference, recall, min_improvement) == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("objective: recall_at_5\ndirection: minimize\n", "contradicts"),
        ("objective: chunks_used_at_1000c\n", "not a quality to optimize"),
        ("objective: recal_at_5\n", "did you mean 'recall_at_5'"),
        ("objective: recall_at_5\ndirection: up\n", "not one of: maximize, minimize"),
    ],
)
def test_objective_and_direction_are_checked(tmp_path: Path, body: str, message: str) -> None:
    path = write(tmp_path, body + "axes:\n  - preprocess: [none, nfkc]\n")
    with pytest.raises(SweepFileError, match=message):
        load_sweep(path)


def test_resume_refuses_a_sweep_that_is_still_running(tmp_path) -> None:
    from mlflow.tracking import MlflowClient

    from ragsweep.config.schema import TrackingConfig
    from ragsweep.core import tags as tag
    from ragsweep.sweep.runs import SweepInProgressError, SweepRuns
    from ragsweep.sweep.spec import load_sweep

    tracking = TrackingConfig(uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="x")
    spec = load_sweep(REPO / "sweeps" / "chunking.yaml")
    live = SweepRuns.open(tracking, spec, "digest", resume=True)  # owned by this live process
    client = MlflowClient(tracking.uri)
    child = client.create_run(live.experiment_id, tags={tag.PARENT_RUN_ID: live.parent_id})
    with pytest.raises(SweepInProgressError, match="still RUNNING"):
        SweepRuns.open(tracking, spec, "digest", resume=True)
    assert client.get_run(child.info.run_id).info.status == "RUNNING"  # left alone

    # the owner died without closing the run (kill -9): resuming takes it over
    client.set_tag(live.parent_id, tag.SWEEP_OWNER, f"{socket.gethostname()}:{dead_pid()}")
    resumed = SweepRuns.open(tracking, spec, "digest", resume=True)
    assert resumed.resumed and resumed.parent_id == live.parent_id
    assert client.get_run(child.info.run_id).info.status == "KILLED"


def dead_pid() -> int:
    """The pid of a process that has exited."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


def test_long_form_axis_and_decision_settings(tmp_path: Path) -> None:
    spec = load_sweep(
        write(
            tmp_path,
            "axes:\n"
            "  - values: {chunking: [fixed, heading]}\n"
            "    allow_multi_factor: true\n"
            "  - preprocess: [none, nfkc]\n"
            "decision: significant\nalpha: 0.01\nresamples: 2000\nseed: 3\n",
        )
    )
    assert spec.axes[0] == Axis(("chunking",), (("fixed", "heading"),), allow_multi_factor=True)
    assert spec.axes[1].allow_multi_factor is False
    assert (spec.decision, spec.alpha, spec.resamples, spec.seed) == ("significant", 0.01, 2000, 3)
    params = spec.params()
    assert params["sweep.axis.1"] == "chunking=[fixed, heading] (allow_multi_factor)"
    assert (params["sweep.decision"], params["sweep.alpha"]) == ("significant", "0.01")
    assert spec.plan()["decision"] == "significant"  # part of the resume identity
    default = load_sweep(write(tmp_path, "axes:\n  - preprocess: [none]\n", "d.yaml"))
    assert (default.decision, default.alpha, default.resamples, default.seed) == (
        "best",
        0.05,
        10_000,
        0,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "axes:\n  - chunking: [fixed]\n    allow_multi_factor: true\n",
            r"axes\[0\]\.allow_multi_factor: per-axis options need the long form",
        ),
        (
            "axes:\n  - values: {chunking: [fixed]}\n    allow_multi_factr: true\n",
            r"did you mean sweep\.axes\[0\]\.allow_multi_factor",
        ),
        ("axes:\n  - values: [fixed]\n", r"axes\[0\]\.values must be a mapping"),
        ("axes:\n  - values: {}\n", r"axes\[0\]\.values must be a mapping 'key: \[values\]'"),
        (
            "axes:\n  - values: {chunking: [fixed]}\n    allow_multi_factor: yes please\n",
            "must be true or false",
        ),
        ("axes:\n  - values: {corpus.path: [a]}\n", "cannot be an axis"),
        ("axes:\n  - chunking: [fixed]\ndecision: signifcant\n", "did you mean 'significant'"),
        ("axes:\n  - chunking: [fixed]\nalpha: 1.5\n", r"sweep\.alpha=1\.5 must be in \(0, 1\)"),
        ("axes:\n  - chunking: [fixed]\nresamples: 0\n", r"sweep\.resamples=0 must be >= 1"),
        ("axes:\n  - chunking: [fixed]\nseed: -1\n", r"sweep\.seed=-1 must be >= 0"),
    ],
)
def test_invalid_axis_options_and_decision_settings(tmp_path: Path, text: str, message: str):
    path = write(tmp_path, text)
    with pytest.raises(SweepFileError, match=message) as info:
        load_sweep(path)
    assert str(path) in str(info.value)


# -- decide: the rules over per-case values (ragsweep.sweep.select) ---------------------------

RECALL = measures.parse("recall_at_5")


def values(*per_case: float) -> CaseValues:
    return CaseValues({f"q{i}": v for i, v in enumerate(per_case)})


def candidate(cases: CaseValues | Unpaired, name: str) -> Candidate:
    objective = None if isinstance(cases, Unpaired) else statistics.fmean(cases.by_case.values())
    return Candidate(objective, name, cases)


def settings(rule: str, min_improvement: float = 0.01) -> DecisionSettings:
    return DecisionSettings(RECALL, rule, min_improvement, alpha=0.05, resamples=10_000, seed=0)


# the start misses 12 cases; "weak" finds 2 of them (p = 0.5), "strong" finds 8 (p = 2/256)
START = values(*[0.0] * 12)
WEAK = values(1.0, 1.0, *[0.0] * 10)
STRONG = values(*[1.0] * 8, *[0.0] * 4)


@pytest.mark.parametrize(
    ("rule", "challenger", "chosen"),
    [
        ("best", WEAK, 1),  # +0.167 beats min_improvement: adopted on 2 cases
        ("significant", WEAK, 0),  # p = 0.5: the start is kept
        ("significant", STRONG, 1),  # p = 0.0078 < 0.05: adopted
    ],
)
def test_decide_by_rule(rule: str, challenger: CaseValues, chosen: int) -> None:
    decision = decide([candidate(START, "start"), candidate(challenger, "new")], 0, settings(rule))
    assert decision.chosen == chosen and decision.reference == 0
    assert decision.runner_up == 1 - chosen
    other = decision.paired[1 - chosen]
    assert isinstance(other, PairedDifference) and decision.paired[chosen] is None
    # Δ is the other value minus the chosen one, on the same cases
    sign = 1 if chosen == 0 else -1
    gain = statistics.fmean(challenger.by_case.values())
    assert other.delta == pytest.approx(sign * gain)
    assert other.p_value == pytest.approx(0.5 if challenger is WEAK else 2 / 256)
    assert decision.distinguishable is (challenger is STRONG)


def test_significant_never_adopts_a_value_without_paired_cases() -> None:
    unpaired = Candidate(0.9, "new", Unpaired("no cases.jsonl"))
    for rule, chosen in (("best", 1), ("significant", 0)):
        decision = decide([candidate(START, "start"), unpaired], 0, settings(rule))
        assert decision.chosen == chosen
        assert decision.distinguishable is None  # nothing to test the runner-up with


def test_significant_picks_the_best_of_the_admitted_and_skips_same_configs() -> None:
    better = values(*[1.0] * 10, 0.0, 0.0)
    decision = decide(
        [
            candidate(START, "start"),
            candidate(STRONG, "strong"),
            candidate(WEAK, "weak"),  # beats min_improvement, not significant: not admitted
            candidate(better, "better"),
            candidate(better, "better"),  # the same configuration listed twice
        ],
        0,
        settings("significant"),
    )
    assert decision.chosen == 3
    assert decision.runner_up == 1  # the duplicate of the chosen one is not a runner-up
    runner_up = decision.paired[1]
    assert isinstance(runner_up, PairedDifference) and runner_up.delta == pytest.approx(-2 / 12)


def test_a_validation_message_with_a_value_still_finds_its_key() -> None:
    assert message_parts("sweep.axes[1].objetive=mrr is not a known key") == [
        "axes",
        1,
        "objetive",
    ]
    assert message_parts("sweep.baseline.chunking.size=0: must be > 0") == [
        "baseline",
        "chunking",
        "size",
    ]
