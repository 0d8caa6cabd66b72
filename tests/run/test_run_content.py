"""What a run shows in MLflow: the headline metrics, the params, the names, the descriptions
and the parent's trail, read back from a real SQLite store after the real sweeper and a
plain Hydra grid ran the real pipeline over the same configurations."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hydra.core.hydra_config import HydraConfig
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

from ragsweep.cli.job import run_from_config
from ragsweep.core import tags as tag
from ragsweep.release.store import RunStore
from ragsweep.run.metrics import (
    BY_TYPE_FILE,
    COUNTS,
    DOCUMENTED,
    FIGURES_FILE,
    TIMINGS,
    headline_measures,
    headline_names,
    read_figures,
)
from ragsweep.run.names import launch_origin, result_overrides, short_keys, sweep_child_name
from ragsweep.run.record import run_params
from ragsweep.sweep.notes import run_link
from ragsweep.sweep.runs import best_key, trail_key
from ragsweep.tracking.tables import logged_tables_tag, read_table, write_table
from tests.conftest import write_mini_project
from tests.run.test_pipeline import project_overrides
from tests.sweep.test_sweep import multirun, store, write_sweep

DOCS = Path(__file__).resolve().parents[2] / "docs"
KS, BUDGETS = (1, 3, 5, 10), (1000, 2000, 4000)  # conf/eval/default.yaml
SWEEP = """\
description: two axes on the test corpus
axes:
  - preprocess: [none, nfkc]
  - chunking.size: [120, 200]
objective: ndcg_at_10
"""


def app_task(cfg: DictConfig) -> float:
    """What the ``ragsweep`` app does for one job, its launch origin included."""
    hydra_cfg = HydraConfig.get()
    return run_from_config(cfg, Path(hydra_cfg.runtime.output_dir), launch_origin(hydra_cfg))


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A sweep and a grid over the same four configurations, in one store."""
    tmp_path = tmp_path_factory.mktemp("content")
    project = write_mini_project(tmp_path)
    (tmp_path / "outputs").mkdir()
    sweep = write_sweep(tmp_path, SWEEP)
    data = project_overrides(project)
    result = multirun(app_task, tmp_path, "s1", f"sweep={sweep}", *data)
    grid = [o for o in data if not o.startswith("chunking.size")]
    multirun(app_task, tmp_path, "g1", "preprocess=none,nfkc", "chunking.size=120,200", *grid)
    client, experiment = store(tmp_path)
    runs = client.search_runs([experiment], max_results=100)
    parent = next(r for r in runs if r.data.tags.get(tag.SWEEP_ROLE) == "parent")
    return {
        "result": result,
        "client": client,
        "experiment": experiment,
        "runs": runs,
        "parent": parent,
        "children": [r for r in runs if r.data.tags.get(tag.PARENT_RUN_ID) == parent.info.run_id],
        "grid": [r for r in runs if tag.SWEEP not in r.data.tags],
        "uri": f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}",
    }


@pytest.mark.slow
def test_every_run_logs_the_named_headline_set_only(logged: dict[str, Any]) -> None:
    runs = [*logged["children"], *logged["grid"]]
    assert len(logged["children"]) == 3 and len(logged["grid"]) == 4
    assert len(headline_measures(KS, BUDGETS, "ndcg_at_10")) == 2 * (len(KS) + len(BUDGETS)) + 2
    for run in runs:
        objective = run.data.params["eval.objective"]  # the sweep's: ndcg_at_10, the grid's not
        names = headline_names(KS, BUDGETS, objective)
        measures = headline_measures(KS, BUDGETS, objective)
        metrics = set(run.data.metrics)
        assert metrics <= set(names), metrics - set(names)
        # value, interval, weakest; n's, timings
        assert len(metrics) <= 4 * len(measures) + len(COUNTS) + len(TIMINGS)
        for measure in measures:
            name = measure.name
            assert {name, f"{name}_ci_low", f"{name}_ci_high", f"by_type_min/{name}"} <= metrics
        assert {"n_cases", "n_answerable", "n_unanswerable", "n_chunks", "eval_seconds"} <= metrics
        assert not any(m.startswith(("by_type/", "cache/", "n_cases/")) for m in metrics)


@pytest.mark.slow
def test_other_figures_are_in_mlflow_tables(
    logged: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    client: MlflowClient = logged["client"]
    child = logged["children"][0]
    run_id = child.info.run_id
    entries = json.loads(child.data.tags[tag.LOGGED_ARTIFACTS])
    assert {"path": FIGURES_FILE, "type": "table"} in entries
    assert {"path": BY_TYPE_FILE, "type": "table"} in entries
    local = client.download_artifacts(run_id, FIGURES_FILE, str(Path(logged["uri"][10:]).parent))
    figures = read_figures(Path(local).read_text(encoding="utf-8"), FIGURES_FILE)
    assert not any(k.startswith("by_type/") for k in figures)  # those are in by_type.json only
    assert "cache/seconds_saved" in figures and "coverage_at_5" in figures
    assert all(figures[k] == v for k, v in child.data.metrics.items())
    # MLflow itself finds the tables by that tag (the UI's evaluation view does the same);
    # load_table searches the store of the environment
    monkeypatch.setenv("MLFLOW_TRACKING_URI", logged["uri"])
    table = client.load_table(logged["experiment"], BY_TYPE_FILE, run_ids=[run_id])
    assert {"slice", "type", "n", "measure", "mean", "ci_low", "ci_high"} <= set(table.columns)
    assert "factual" in set(table["type"])
    # readers of single runs (promotion, the gate's baseline, ratchet) see every figure
    read = RunStore(logged["uri"]).get(run_id)
    factual = table[(table["type"] == "factual") & (table["measure"] == "recall_at_5")]
    (mean,) = factual["mean"]
    assert read.metrics["by_type/factual/recall_at_5"] == mean
    (low,) = factual["ci_low"]
    assert read.metrics["by_type/factual/recall_at_5_ci_low"] == low
    assert all(read.metrics[k] == v for k, v in figures.items())


@pytest.mark.slow
def test_params_are_the_result_affecting_config_under_override_keys(
    logged: dict[str, Any],
) -> None:
    for run in [*logged["children"], *logged["grid"]]:
        params = run.data.params
        assert not [k for k in params if k.startswith(("paths.", "tracking.", "cache.", "sweep"))]
        for key in ("chunking.size", "preprocess.steps", "embedding.backend", "eval.budgets"):
            assert key in params
        assert params["rerank.enabled"] == "False" and "rerank.model" not in params
    assert {r.data.params["preprocess.name"] for r in logged["grid"]} == {"none", "nfkc"}


@pytest.mark.slow
def test_the_parent_has_a_trail_of_its_own_not_the_objective(logged: dict[str, Any]) -> None:
    client: MlflowClient = logged["client"]
    parent, result = logged["parent"], logged["result"]
    assert "ndcg_at_10" not in parent.data.metrics
    trail = client.get_metric_history(parent.info.run_id, trail_key("ndcg_at_10"))
    assert [m.step for m in trail] == [1, 2]
    assert [m.value for m in trail] == [step["objective"] for step in result.trail]
    assert parent.data.metrics[best_key("ndcg_at_10")] == result.final.objective


@pytest.mark.slow
def test_names_say_axis_and_value_and_never_collide(logged: dict[str, Any]) -> None:
    names = [r.info.run_name for r in logged["runs"]]
    assert len(names) == len(set(names)), names
    parent_id = logged["parent"].info.run_id
    for child in logged["children"]:
        tags = child.data.tags
        axis = tags[tag.AXIS].rsplit(".", 1)[-1]  # chunking.size → size: the sweep's only size
        expected = f"{axis}={tags[tag.AXIS_VALUE]} #{parent_id[:4]}"
        assert child.info.run_name == expected
        if tags[tag.AXIS] == "chunking.size":  # what MLflow 3.17's Run Name column shows
            assert len(expected) <= 18, expected
    assert "preprocess=none #" in " ".join(names)  # the option the user typed, not "raw"
    assert "size=200 #" in " ".join(names)
    for run in logged["grid"]:  # a grid job lists its overrides, with the grid's suffix
        assert re.fullmatch(
            r"preprocess=\w+ chunking\.size=\d+ chunking\.overlap=20 #[0-9a-f]{6}",
            run.info.run_name,
        )
    assert logged["parent"].info.run_name == f"sweep mini #{parent_id[:4]}"


@pytest.mark.slow
def test_descriptions_link_children_and_parent(logged: dict[str, Any]) -> None:
    parent, experiment = logged["parent"], logged["experiment"]
    link = run_link(experiment, parent.info.run_id)
    for child in logged["children"]:
        note = child.data.tags[tag.NOTE]
        tags = child.data.tags
        assert f"`{tags[tag.AXIS]}` = `{tags[tag.AXIS_VALUE]}`" in note
        assert link in note and "ndcg_at_10" in note
        chosen = tags[tag.CHOSEN] == "true"
        assert ("**chosen**" in note.split("\n")[2]) == chosen
    best = logged["result"].final.run_id
    best_child = next(c for c in logged["children"] if c.info.run_id == best)
    note = parent.data.tags[tag.NOTE]
    assert best in note and run_link(experiment, best) in note
    assert best_child.info.run_name in note
    assert "| 1. preprocess |" in note and "| 2. chunking.size |" in note
    for run in logged["grid"]:  # a run on its own describes its config and objective
        assert "**ndcg_at_10** = " not in run.data.tags[tag.NOTE]
        assert "**recall_at_5** = " in run.data.tags[tag.NOTE]
        assert "**chunking** fixed" in run.data.tags[tag.NOTE]


def test_the_docs_list_every_logged_metric() -> None:
    text = (DOCS / "tracking.md").read_text(encoding="utf-8")
    missing = [pattern for pattern in DOCUMENTED if f"`{pattern}`" not in text]
    assert not missing, f"docs/tracking.md does not list {missing}"


def test_names_keep_only_the_overrides_that_change_a_result() -> None:
    typed = [
        "preprocess=none",
        "chunking.size=400",
        "+eval.ks=[1,5]",
        "corpus.path=/data/docs",  # not hashed: the corpus is hashed by its content
        "eval.seed=3",
        "tracking.uri=sqlite:///x.db",
        "paths.output_dir=/tmp/out",
        "cache.enabled=false",
        "hydra.job.chdir=true",
        "sweep=chunking",
    ]
    assert result_overrides(typed) == ["preprocess=none", "chunking.size=400", "+eval.ks=[1,5]"]
    assert sweep_child_name((("chunking.mode", "heading"),), "3204f520119c48") == (
        "mode=heading #3204"
    )
    swept = ["embedding.model", "rerank.model", "chunking.size"]
    assert sweep_child_name((("rerank.model", "m2"),), "3204f5", swept) == "rerank.model=m2 #3204"
    two_keys = (("chunking.size", "400"), ("embedding.model", "m1"))
    assert sweep_child_name(two_keys, "ab12cd", swept) == "size=400 embedding.model=m1 #ab12"
    assert short_keys(["a.x", "b.x", "x", "c.y"]) == {
        "a.x": "a.x",
        "b.x": "b.x",
        "x": "x",
        "c.y": "y",
    }


def test_params_leave_out_bookkeeping_and_stages_that_are_off() -> None:
    source = {
        "chunking": {"size": 400, "mode": "fixed"},
        "preprocess": {"name": "none", "steps": []},
        "rerank": {"enabled": False, "model": "", "threads": 2},
        "paths": {"output_dir": "/tmp"},
        "tracking": {"uri": None},
        "cache": {"dir": "/c"},
        "hydra": {"x": 1},
    }
    assert run_params(source) == {
        "chunking.size": "400",
        "chunking.mode": "fixed",
        "preprocess.name": "none",
        "preprocess.steps": "[]",
        "rerank.enabled": "False",
    }


def test_a_table_reads_back_and_the_tag_keeps_other_tables(tmp_path: Path) -> None:
    path = write_table(tmp_path / "t.json", ["figure", "value"], [["recall_at_5", 0.5]])
    assert read_table(path.read_text(encoding="utf-8"), "t.json") == [
        {"figure": "recall_at_5", "value": 0.5}
    ]
    with pytest.raises(ValueError, match=r"t\.json: row 0"):
        write_table(tmp_path / "t.json", ["figure", "value"], [["too short"]])
    earlier = {tag.LOGGED_ARTIFACTS: '[{"path": "cases.json", "type": "table"}]'}
    assert json.loads(logged_tables_tag(["t.json", "cases.json"], earlier)) == [
        {"path": "cases.json", "type": "table"},
        {"path": "t.json", "type": "table"},
    ]
