"""A one-axis sweep with the joblib launcher (4 concurrent jobs) on a fresh MLflow store, run
as a user runs it: the ``ragsweep`` console script in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.cli.test_cli import ragsweep
from tests.run.test_pipeline import project_overrides

SWEEP = """\
axes:
  - chunking.size: [100, 120, 160, 200]
objective: recall_at_5
"""


@pytest.mark.slow
def test_joblib_parallel_sweep_on_a_fresh_store(tmp_path: Path, mini_project: Path) -> None:
    sweep = tmp_path / "parallel.yaml"
    sweep.write_text(SWEEP, encoding="utf-8")
    out = ragsweep(
        "-m",
        f"sweep={sweep}",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=4",
        f"paths.output_dir={tmp_path / 'outputs'}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *project_overrides(mini_project),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr and "database is locked" not in out.stderr
    assert "axis 1/1 chunking.size: launching 4 of 4 configuration(s)" in out.stdout
    assert "final recall_at_5 = " in out.stdout  # the end-of-sweep table was printed

    client = MlflowClient(f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    runs = client.search_runs(client.get_experiment_by_name("ragsweep").experiment_id)
    (parent,) = [r for r in runs if r.data.tags.get("ragsweep.sweep_role") == "parent"]
    children = [r for r in runs if r is not parent]
    assert len(children) == 4
    assert all(c.info.status == "FINISHED" for c in children)
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert len({c.data.tags["ragsweep.config_hash"] for c in children}) == 4
    sizes = {c.data.params["chunking.size"] for c in children}
    assert sizes == {"100", "120", "160", "200"}

    result = yaml.safe_load((tmp_path / "sweep" / "sweep_result.yaml").read_text())
    assert result["complete"] is True
    objectives = {c.info.run_id: c.data.metrics["recall_at_5"] for c in children}
    assert objectives[result["final"]["run_id"]] == result["final"]["objective"]
    assert result["final"]["objective"] == max(objectives.values())
    # per-case values written by the worker processes pair every value with the chosen one
    (axis,) = result["axes"]
    others = [t for t in axis["trials"] if t["value"] != axis["chosen"]]
    assert len(others) == 3
    assert all(0 < t["vs_chosen"]["p_value"] <= 1 and t["vs_chosen"]["n"] == 3 for t in others)
    assert "95% interval" in out.stdout
