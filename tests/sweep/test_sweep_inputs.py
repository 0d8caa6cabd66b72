"""A sweep's inputs are fixed when it starts (issue 32, item 1): a golden set rewritten
while a real ``ragsweep -m sweep=...`` runs fails the jobs that read it with a named error,
the sweep exits non-zero with its parent FAILED and nothing chosen, and the same command
after the file is restored resumes and runs the failed jobs again."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import yaml
from mlflow.tracking import MlflowClient

from tests.reliability.conftest import run_command


def _truncate_after_first_job(sweep_dir: Path, golden: Path, stop: threading.Event) -> None:
    """Keep 3 lines of ``golden`` as soon as the sweep's first job wrote its report."""
    while not stop.is_set():
        if any(sweep_dir.glob("*/report.md")):
            lines = golden.read_text(encoding="utf-8").splitlines(keepends=True)
            golden.write_text("".join(lines[:3]), encoding="utf-8")
            return
        time.sleep(0.01)


def test_a_golden_set_rewritten_mid_sweep_fails_its_jobs_and_resume_reruns_them(
    tmp_path: Path, mini_project: Path
) -> None:
    (tmp_path / "live").mkdir()
    golden = tmp_path / "live" / "golden.jsonl"
    shutil.copy(mini_project / "golden.jsonl", golden)
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "sizes.yaml").write_text("axes:\n  - chunking.size: [100, 140]\n", "utf-8")
    out_dir = tmp_path / "out"
    args = [
        "-m",
        f"paths.output_dir={out_dir}",
        f"corpus.path={mini_project / 'corpus'}",
        f"golden.path={golden}",
        "chunking.size=120",
        "chunking.overlap=20",
        f"hydra.sweeper.sweeps_dir={sweeps}",
        "sweep=sizes",
    ]
    stop = threading.Event()
    rewrite = threading.Thread(
        target=_truncate_after_first_job, args=(tmp_path / "s1", golden, stop)
    )
    rewrite.start()
    try:
        out = run_command("ragsweep", *args, f"hydra.sweep.dir={tmp_path / 's1'}", cwd=tmp_path)
    finally:
        stop.set()
        rewrite.join()
    assert out.returncode == 2, out.stderr[-3000:]
    assert "golden set changed during the sweep: " + str(golden) + " now hashes to" in " ".join(
        out.stderr.split()
    )
    assert "no configuration was chosen" in out.stderr and "Traceback" not in out.stderr
    saved = yaml.safe_load((tmp_path / "s1" / "sweep_result.yaml").read_text())
    assert saved["complete"] is False
    statuses = [t["status"] for t in saved["axes"][0]["trials"]]
    assert "new" in statuses and "failed" in statuses  # before and after the rewrite
    client = MlflowClient(f"sqlite:///{out_dir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ragsweep").experiment_id
    (parent,) = client.search_runs([experiment], "tags.`ragsweep.sweep_role` = 'parent'")
    assert parent.info.status == "FAILED"

    shutil.copy(mini_project / "golden.jsonl", golden)  # restored: the same sweep resumes
    out = run_command("ragsweep", *args, f"hydra.sweep.dir={tmp_path / 's2'}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"resuming sweep sizes (parent run {parent.info.run_id})" in " ".join(out.stdout.split())
    assert client.get_run(parent.info.run_id).info.status == "FINISHED"
    saved = yaml.safe_load((tmp_path / "s2" / "sweep_result.yaml").read_text())
    assert saved["complete"] is True
    assert "failed" not in [t["status"] for t in saved["axes"][0]["trials"]]
