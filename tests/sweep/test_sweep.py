"""The one-axis sweeper run in-process through Hydra: a fake objective (the decisions), the
real pipeline on the small test corpus (MLflow structure), failures, and resume."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from ragsweep.cli.callbacks import RequireMultirunForSweep
from ragsweep.cli.job import run_from_config
from ragsweep.config.app import config_dir
from ragsweep.config.schema import CorpusConfig
from ragsweep.core import tags as tag
from ragsweep.core.errors import RagsweepError
from ragsweep.data.corpus import corpus_files_digest
from ragsweep.sweep.paired import PairedDifference
from ragsweep.sweep.report import plot_title
from ragsweep.sweep.result import SweepResult
from ragsweep.sweep.runs import find_unfinished_parent
from tests.run.test_pipeline import project_overrides

Task = Callable[[DictConfig], Any]

# The fake objective: a pure function of the composed config (so, of the overrides).
MODE = {"fixed": 0.40, "paragraph": 0.405, "heading": 0.50}
PREPROCESS = {"none": 0.0, "nfkc": 0.02, "nfkc_synonyms": 0.025}
SIZE = {400: -0.02, 800: 0.05, 1200: 0.0}
OVERLAP = {0: 0.0, 100: 0.0, 200: 0.005}

FAKE_SWEEP = """\
description: fake objective
axes:
  - values: {chunking: [fixed, paragraph, heading]}
    allow_multi_factor: true  # the options set different sizes and overlaps too
  - preprocess: [none, nfkc, nfkc_synonyms]
  - chunking.size: [400, 800, 1200]
  - chunking.overlap: [0, 100, 200, 900]
objective: recall_at_5
direction: maximize
min_improvement: 0.01
"""


class FakeTask:
    """Records every call; raises for the chunking modes in ``fail``."""

    def __init__(self, fail: Sequence[str] = ()) -> None:
        self.fail = set(fail)
        self.calls: list[tuple[str, str, int, int]] = []

    def __call__(self, cfg: DictConfig) -> float:
        c = cfg.chunking
        self.calls.append((c.mode, cfg.preprocess.name, c.size, c.overlap))
        if c.mode in self.fail:
            raise RagsweepError(f"simulated failure for chunking={c.mode}")
        return MODE[c.mode] + PREPROCESS[cfg.preprocess.name] + SIZE[c.size] + OVERLAP[c.overlap]


def multirun(task: Task, tmp_path: Path, name: str, *overrides: str) -> Any:
    """``ragsweep -m *overrides`` in-process with ``task``; sweep folder ``tmp_path/name``."""
    base = [
        f"paths.output_dir={tmp_path / 'outputs'}",
        f"hydra.sweep.dir={tmp_path / name}",
        "hydra/job_logging=none",
        "hydra/hydra_logging=none",
    ]
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3", job_name="t"):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        return hydra.multirun(
            config_name="config",
            task_function=task,
            overrides=[*base, *overrides],
            with_log_configuration=False,
        )


def unwrapped(text: str) -> str:
    """``text`` with every run of whitespace (the terminal's line wrapping) as one space."""
    return " ".join(text.split())


def write_sweep(tmp_path: Path, text: str, name: str = "mini.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def store(tmp_path: Path) -> tuple[MlflowClient, str]:
    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    return client, client.get_experiment_by_name("ragsweep").experiment_id


@pytest.fixture(scope="session")
def migrated_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow SQLite store with its schema created once per session (creating
    the schema takes seconds; tests/sweep/test_sweep_parallel.py covers a brand-new store)."""
    path = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def outputs(tmp_path: Path, migrated_store: Path) -> Path:
    """``paths.output_dir`` of a test, holding a copy of the migrated empty store."""
    (tmp_path / "outputs").mkdir()
    shutil.copy(migrated_store, tmp_path / "outputs" / "mlflow.db")
    return tmp_path / "outputs"


class Counter:
    """Counts the calls of a task."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.calls = 0

    def __call__(self, cfg: DictConfig) -> Any:
        self.calls += 1
        return self.task(cfg)


def test_one_axis_picks_per_axis_and_skips_evaluated_configs(tmp_path: Path, capsys) -> None:
    task = FakeTask()
    sweep = write_sweep(tmp_path, FAKE_SWEEP)
    result = multirun(task, tmp_path, "s1", f"sweep={sweep}", "tracking.enabled=false")

    assert isinstance(result, SweepResult)
    chosen = {a.axis.label: a.best.point.label for a in result.axes if a.best}
    assert chosen == {
        "chunking": "heading",  # paragraph's +0.005 over fixed is within min_improvement
        "preprocess": "nfkc_synonyms",  # both qualify: the best wins
        "chunking.size": "800",
        "chunking.overlap": "100",  # 0 ties the start, 200 gains only +0.005
    }
    # 3 + 3 + 3 + 3 valid values, minus the start config carried into axes 2-4
    assert len(task.calls) == 9 and len(set(task.calls)) == 9
    statuses = {(a.axis.label, t.point.label): t.status for a in result.axes for t in a.trials}
    assert statuses[("preprocess", "none")] == "reused"
    assert statuses[("chunking.size", "1200")] == "reused"
    assert statuses[("chunking.overlap", "900")] == "invalid"
    invalid = result.axes[3].trials[3]
    assert invalid.error is not None and "chunking.overlap=900" in invalid.error

    assert result.final is not None
    assert result.final.objective == pytest.approx(0.575)
    assert "chunking=heading" in result.final.overrides
    assert "chunking.size=800" in result.final.overrides
    assert result.final.config["chunking"]["mode"] == "heading"

    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert saved["complete"] is True
    assert saved["chosen"] == chosen
    assert [round(s["objective"], 4) for s in saved["trail"]] == [0.5, 0.525, 0.575, 0.575]
    assert (tmp_path / "s1" / "objective_by_axis.png").stat().st_size > 0
    assert plot_title(result) == [
        f"sweep {result.spec.name}: recall_at_5 (maximize) by axis value, split tuning",
        f"final config {result.final.config_hash[:12]}: recall_at_5 = 0.5750 "
        "(orange: chosen value)",
    ]
    out = capsys.readouterr().out
    assert "not launched: none (reused)" in out
    assert "chosen" in out and "final recall_at_5 = 0.5750" in out


def test_first_axis_runs_the_baseline_when_its_value_is_not_listed(tmp_path: Path, capsys):
    # The baseline's chunking.size (800, the best) is not among the first axis's values.
    task = FakeTask()
    sweep = write_sweep(
        tmp_path, "axes:\n  - chunking.size: [400, 1200]\n  - chunking.overlap: [0]\n"
    )
    result = multirun(task, tmp_path, "s1", f"sweep={sweep}", "tracking.enabled=false")

    assert sorted(c[2:] for c in task.calls) == [(400, 100), (800, 0), (800, 100), (1200, 100)]
    first = result.axes[0]
    assert [(t.point.label, t.status, t.incumbent) for t in first.trials] == [
        ("800", "new", True),
        ("400", "new", False),
        ("1200", "new", False),
    ]
    assert first.best is not None and first.best.point.label == "800"  # the start is kept
    assert result.final is not None and result.final.objective == pytest.approx(0.45)
    out = unwrapped(capsys.readouterr().out)
    assert "the start value 800 is not among the values; it runs too" in out


def failed_sweep(task: Task, tmp_path: Path, capsys: Any, *overrides: str) -> dict[str, Any]:
    """Run a sweep some of whose jobs fail: it exits with status 2 and chooses nothing;
    return its ``sweep_result.yaml``."""
    with pytest.raises(SystemExit) as exit_info:
        multirun(task, tmp_path, "s1", *overrides)
    assert exit_info.value.code == 2
    err = unwrapped(capsys.readouterr().err)
    assert "job(s) of the sweep failed" in err and "no configuration was chosen" in err
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert saved["complete"] is False and saved["final"] is None
    return saved


def test_a_failing_start_is_shown_and_the_listed_values_decide(tmp_path: Path, capsys) -> None:
    task = FakeTask(fail=["fixed"])  # the baseline's chunking mode
    sweep = write_sweep(tmp_path, "axes:\n  - chunking.mode: [paragraph, heading]\n")
    saved = failed_sweep(task, tmp_path, capsys, f"sweep={sweep}", "tracking.enabled=false")
    trials = saved["axes"][0]["trials"]
    assert [(t["value"], t["status"], t["incumbent"]) for t in trials] == [
        ("fixed", "failed", True),
        ("paragraph", "new", False),
        ("heading", "new", False),
    ]
    assert saved["axes"][0]["chosen"] == "heading"


def test_failed_job_is_recorded_and_the_sweep_goes_on(
    tmp_path: Path, outputs: Path, capsys
) -> None:
    task = FakeTask(fail=["paragraph"])
    sweep = write_sweep(tmp_path, "axes:\n  - chunking.mode: [fixed, paragraph, heading]\n")
    with pytest.raises(SystemExit) as exit_info:  # a failed job: exit 2, nothing chosen
        multirun(task, tmp_path, "s1", f"sweep={sweep}")
    assert exit_info.value.code == 2
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert len(task.calls) == 3
    assert [t["status"] for t in saved["axes"][0]["trials"]] == ["new", "failed", "new"]
    assert saved["final"] is None
    out = capsys.readouterr().out
    assert "failed chunking.mode=paragraph: RagsweepError: simulated failure" in out

    client, experiment = store(tmp_path)
    runs = client.search_runs(experiment)
    parent = next(r for r in runs if r.data.tags.get("ragsweep.sweep_role") == "parent")
    assert parent.info.status == "FAILED"  # resumable: a resume runs paragraph again
    (failed,) = [r for r in runs if r is not parent]
    assert failed.info.status == "FAILED"
    tags = failed.data.tags
    assert tags["mlflow.parentRunId"] == parent.info.run_id
    assert (tags["ragsweep.axis"], tags["ragsweep.axis_value"]) == ("chunking.mode", "paragraph")
    assert tags["ragsweep.error"] == "RagsweepError: simulated failure for chunking=paragraph"
    assert tags["ragsweep.config_hash"] == saved["axes"][0]["trials"][1]["config_hash"]
    assert failed.data.params["chunking.mode"] == "paragraph"
    assert "error.txt" in {a.path for a in client.list_artifacts(failed.info.run_id)}


class FailsWhileLogging(FakeTask):
    """For chunking=paragraph: creates its MLflow run as the pipeline does, then fails
    while logging it (as a locked database or a full disk would), leaving that run FAILED."""

    def __call__(self, cfg: DictConfig) -> float:
        if cfg.chunking.mode != "paragraph":
            return super().__call__(cfg)
        from ragsweep.config.app import plain_config
        from ragsweep.run.config import resolve
        from ragsweep.tracking.log import RunRecord, log_run

        resolved = resolve(plain_config(cfg))
        run_cfg = resolved.cfg
        tags = {
            **run_cfg.tracking.tags,
            tag.CONFIG_HASH: resolved.config_hash,
            tag.PARENT_RUN_ID: str(run_cfg.tracking.parent_run_id),
        }
        bad_metric = {"not a valid metric name!": 1.0}  # MLflow refuses it mid-logging
        job_dir = Path(HydraConfig.get().runtime.output_dir)
        log_run(run_cfg.tracking, RunRecord("paragraph", {}, bad_metric, tags, job_dir))
        raise AssertionError("unreachable: log_run fails on the metric name")


def test_a_job_that_failed_while_logging_keeps_one_child_run(tmp_path: Path, outputs: Path, capsys):
    task = FailsWhileLogging()
    sweep = write_sweep(tmp_path, "axes:\n  - chunking.mode: [fixed, paragraph]\n")
    saved = failed_sweep(task, tmp_path, capsys, f"sweep={sweep}")
    trials = saved["axes"][0]["trials"]
    assert [t["status"] for t in trials] == ["new", "failed"]

    client, experiment = store(tmp_path)
    children = [r for r in client.search_runs(experiment) if "mlflow.parentRunId" in r.data.tags]
    # FakeTask logs nothing for fixed; paragraph's own run gets the error: one run, not two
    (failed,) = children
    assert failed.info.status == "FAILED"
    parent_id = failed.data.tags["mlflow.parentRunId"]
    assert failed.info.run_name == f"FAILED mode=paragraph #{parent_id[:4]}"
    assert failed.data.params["chunking.mode"] == "paragraph"  # completed by the sweeper
    assert failed.data.tags["ragsweep.config_hash"] == trials[1]["config_hash"]
    assert "not a valid metric name!" in failed.data.tags["ragsweep.error"]
    assert "error.txt" in {a.path for a in client.list_artifacts(failed.info.run_id)}


def test_sweep_stops_when_every_value_of_an_axis_fails(tmp_path: Path, capsys) -> None:
    task = FakeTask(fail=["fixed", "heading"])
    sweep = write_sweep(
        tmp_path, "axes:\n  - chunking.mode: [fixed, heading]\n  - preprocess: [nfkc]\n"
    )
    with pytest.raises(SystemExit) as exit_info:
        multirun(task, tmp_path, "s1", f"sweep={sweep}", "tracking.enabled=false")
    assert exit_info.value.code == 2
    assert "error: axis 1 (chunking.mode): every value failed" in capsys.readouterr().err
    assert len(task.calls) == 2
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert saved["complete"] is False and saved["final"] is None
    assert [t["status"] for t in saved["axes"][0]["trials"]] == ["failed", "failed"]


@pytest.mark.parametrize(
    ("axes", "extra", "message"),
    [
        (
            "  - preprocess: [none]\n  - chunking: [fixed, heding]\n",
            [],
            "axis 2 (chunking): no option heding in config group chunking (options: fixed, ",
        ),
        ("  - chunking.sise: [400]\n", [], "axis 1 (chunking.sise): chunking.sise is not a"),
        (
            "  - preprocess: [none]\n",
            ["chunking.overlap=900"],
            "command line: chunking.overlap=900 must satisfy",
        ),
        (
            "  - chunking.size: [400]\n",
            ["preprocess=none,nfkc"],
            "preprocess=none,nfkc: a one-axis sweep takes its values from",
        ),
    ],
)
def test_sweep_errors_stop_before_any_job(
    tmp_path: Path, capsys, axes: str, extra: list[str], message: str
) -> None:
    task = FakeTask()
    sweep = write_sweep(tmp_path, "axes:\n" + axes)
    with pytest.raises(SystemExit) as exit_info:
        multirun(task, tmp_path, "s1", f"sweep={sweep}", "tracking.enabled=false", *extra)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert task.calls == []


def test_without_a_sweep_file_the_grid_goes_to_the_basic_sweeper(tmp_path: Path) -> None:
    task = FakeTask()
    returns = multirun(
        task,
        tmp_path,
        "g",
        "chunking.size=400,800",
        "preprocess=none,nfkc",
        "tracking.enabled=false",
    )
    assert sorted(task.calls) == [
        ("fixed", "nfkc", 400, 100),
        ("fixed", "nfkc", 800, 100),
        ("fixed", "none", 400, 100),
        ("fixed", "none", 800, 100),
    ]
    assert len(returns[0]) == 4


# -- the real pipeline on the small corpus of tests/conftest.py -------------------------------


def real_task(cfg: DictConfig) -> float:
    """What the ``ragsweep`` app does for one job (returning a plain float: the grid then
    reads its figures from the job's files)."""
    return run_from_config(cfg, Path(HydraConfig.get().runtime.output_dir))


class Interrupt:
    """The real task, with Ctrl-C arriving during the job for ``chunking.size=size``."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, cfg: DictConfig) -> float:
        if cfg.chunking.size == self.size:
            raise KeyboardInterrupt
        return real_task(cfg)


MINI_SWEEP = """\
description: two axes on the test corpus
axes:
  - preprocess: [none, nfkc]
  - chunking.size: [120, 200]
objective: recall_at_5
"""


@pytest.mark.slow
def test_real_sweep_nests_children_and_matches_their_metrics(
    tmp_path: Path, mini_project: Path, outputs: Path
) -> None:
    sweep = write_sweep(tmp_path, MINI_SWEEP)
    result = multirun(real_task, tmp_path, "s1", f"sweep={sweep}", *project_overrides(mini_project))
    assert result.final is not None

    client, experiment = store(tmp_path)
    runs = client.search_runs(experiment)
    (parent,) = [r for r in runs if r.data.tags.get("ragsweep.sweep_role") == "parent"]
    children = [r for r in runs if r is not parent]
    assert len(children) == 3  # size=120 with nfkc/none is the start of axis 2: not rerun
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["ragsweep.sweep_axes"] == "preprocess → chunking.size"
    assert parent.data.tags["ragsweep.objective"] == "recall_at_5"
    assert parent.data.params["sweep.axis.2"] == "chunking.size=[120, 200]"
    assert "recall_at_5" not in parent.data.metrics  # its trail has its own key
    assert parent.data.metrics["best/recall_at_5"] == result.final.objective
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"mini.yaml", "sweep_result.yaml", "sweep_summary.md", "objective_by_axis.png"} <= (
        artifacts
    )

    by_id = {c.info.run_id: c for c in children}
    assert len({c.data.tags["ragsweep.config_hash"] for c in children}) == 3
    for child in children:
        assert child.info.status == "FINISHED"
        assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert child.data.tags["ragsweep.sweep"] == "mini"
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    for number, axis in enumerate(saved["axes"], start=1):
        for trial in axis["trials"]:
            child = by_id[trial["run_id"]]
            assert child.data.metrics["recall_at_5"] == trial["objective"]
            assert child.data.metrics["n_answerable"] == trial["n"] == 3
            assert child.data.tags["ragsweep.config_hash"] == trial["config_hash"]
            if trial["status"] == "new":
                assert child.data.tags["ragsweep.axis"] == axis["axis"]
                assert child.data.tags["ragsweep.axis_index"] == str(number)
                assert child.data.tags["ragsweep.axis_value"] == trial["value"]
    # nfkc finds the full-width question of the test corpus: it must win the first axis
    assert saved["chosen"]["preprocess"] == "nfkc"
    best = [c for c in children if c.data.tags.get("ragsweep.best") == "true"]
    assert [b.info.run_id for b in best] == [saved["final"]["run_id"]]
    assert parent.data.tags["ragsweep.best_run_id"] == saved["final"]["run_id"]


@pytest.mark.slow
def test_resume_after_interruption_does_not_rerun_logged_configs(
    tmp_path: Path, mini_project: Path, outputs: Path, capsys
) -> None:
    sweep = write_sweep(tmp_path, MINI_SWEEP)
    args = [f"sweep={sweep}", *project_overrides(mini_project)]
    with pytest.raises(KeyboardInterrupt):
        multirun(Interrupt(size=200), tmp_path, "first", *args)
    client, experiment = store(tmp_path)
    (parent,) = [r for r in client.search_runs(experiment) if tag.SWEEP_DIGEST in r.data.tags]
    assert parent.info.status == "KILLED"
    assert len(client.search_runs(experiment)) == 3  # parent + the two runs of axis 1
    assert (
        find_unfinished_parent(client, experiment, parent.data.tags[tag.SWEEP_DIGEST]) is not None
    )

    counted = Counter(real_task)
    result = multirun(counted, tmp_path, "second", *args)
    out = unwrapped(capsys.readouterr().out)
    assert f"resuming sweep mini (parent run {parent.info.run_id})" in out
    assert "2 configuration(s) already logged" in out
    assert counted.calls == 1  # only chunking.size=200
    assert result.parent_run_id == parent.info.run_id
    assert [t.status for t in result.axes[0].trials] == ["resumed", "resumed"]
    assert {t.status for t in result.axes[1].trials} == {"resumed", "new"}
    # resumed configurations ran in the first sweep folder: their per-case values come from
    # the logged runs' cases.jsonl.gz artifacts, so the paired test still runs
    first = result.axes[0]
    assert first.chosen is not None
    other = first.trials[1 - first.chosen]
    assert isinstance(other.paired, PairedDifference) and other.paired.n == 3

    runs = client.search_runs(experiment)
    children = [r for r in runs if r.info.run_id != parent.info.run_id]
    hashes = [c.data.tags["ragsweep.config_hash"] for c in children]
    assert len(children) == 3 and len(set(hashes)) == 3
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert client.get_run(parent.info.run_id).info.status == "FINISHED"
    digest = parent.data.tags[tag.SWEEP_DIGEST]
    assert find_unfinished_parent(client, experiment, digest) is None  # a rerun starts afresh


def test_sweep_without_multirun_is_an_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        RequireMultirunForSweep().on_run_start(OmegaConf.create({"sweep": "chunking"}))
    assert exit_info.value.code == 2
    assert "ragsweep -m sweep=chunking" in capsys.readouterr().err
    RequireMultirunForSweep().on_run_start(OmegaConf.create({"sweep": None}))  # no sweep: fine


class JudgeAxisTask(FakeTask):
    """Records ``judge.context_chunks`` of every launched job; the objective grows with it."""

    def __call__(self, cfg: DictConfig) -> float:
        self.calls.append(("judge", str(cfg.judge.context_chunks), 0, 0))
        return 0.5 + 0.01 * int(cfg.judge.context_chunks)


def test_a_judge_axis_launches_one_job_per_value(tmp_path: Path) -> None:
    task = JudgeAxisTask()
    sweep = write_sweep(
        tmp_path,
        "baseline: {judge: ollama, judge.generator: g, judge.judge: j}\n"
        "axes:\n  - judge.context_chunks: [3, 5, 8]\n"
        "objective: recall_at_5\n",
    )
    result = multirun(task, tmp_path, "judge", f"sweep={sweep}", "tracking.enabled=false")
    assert sorted(task.calls) == [("judge", v, 0, 0) for v in ("3", "5", "8")]
    (axis,) = result.axes
    assert len({t.config_hash for t in axis.trials}) == 3  # three configurations, not one
    assert axis.best.point.label == "8"


class EditAfterFirstJob:
    """The real task; once the first job is done, ``file`` is edited (appended to)."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.calls = 0

    def __call__(self, cfg: DictConfig) -> float:
        result = real_task(cfg)
        self.calls += 1
        if self.calls == 1:
            self.file.write_text(self.file.read_text(encoding="utf-8") + " edited", "utf-8")
        return result


@pytest.mark.slow
def test_a_parser_axis_runs_each_parser_on_the_same_files(
    tmp_path: Path, mini_project: Path, outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """corpus.pdf_parser as a sweep axis: each parser is its own configuration, the quoted
    PDF evidence resolves, and since the jobs read other corpus text they are held to the
    digest of the corpus's files: an edit between jobs fails the next one."""
    pytest.importorskip("pypdfium2", reason="the parsers extra: pip install -e '.[parsers]'")
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    pdf.add_page()  # words placed out of reading order, spaces run: the parsers' texts differ
    pdf.text(100, 20, "World")
    pdf.text(10, 20, "Hello")
    pdf.text(10, 40, "Refunds:   30 days.")
    pdf.output(str(mini_project / "corpus" / "terms.pdf"))
    golden = mini_project / "golden.jsonl"
    case = '{"id": "p", "question": "refund days?", "split": "tuning", '
    case += '"evidence": [{"doc": "terms.pdf", "quote": "30 days.", "page": 1}]}\n'
    golden.write_text(golden.read_text(encoding="utf-8") + case, encoding="utf-8")
    sweep = write_sweep(tmp_path, "axes:\n  - corpus.pdf_parser: [pypdf, pypdfium2]\n")
    overrides = [f"sweep={sweep}", *project_overrides(mini_project)]
    billing = mini_project / "corpus" / "billing.md"
    files = corpus_files_digest(CorpusConfig(path=str(mini_project / "corpus")))
    with pytest.raises(SystemExit) as exit_info:
        multirun(EditAfterFirstJob(billing), tmp_path, "s1", *overrides)
    assert exit_info.value.code == 2
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert [t["status"] for t in saved["axes"][0]["trials"]] == ["new", "failed"]
    printed = unwrapped("".join(capsys.readouterr()))
    assert f"corpus changed during the sweep: {mini_project / 'corpus'} now hashes" in printed
    assert f"was {files[:12]};" in printed  # the files' digest, not a parser's text digest
    trials = saved["axes"][0]["trials"]
    assert [t["value"] for t in trials] == ["pypdf", "pypdfium2"]
    assert len({t["config_hash"] for t in trials}) == 2  # each parser is its own config
    client, experiment = store(tmp_path)
    children = [r for r in client.search_runs(experiment) if "mlflow.parentRunId" in r.data.tags]
    (finished,) = [c for c in children if c.info.status == "FINISHED"]
    assert finished.data.metrics["n_answerable"] == 4  # the PDF's quote resolved (pypdf)
    # (resuming after the file is restored: test_sweep_inputs.py; the quote under
    # pypdfium2: tests/data/test_parsers.py)
