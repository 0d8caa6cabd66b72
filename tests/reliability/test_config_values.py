"""Values that used to pass validation and fail mid-run or at the end (issue 12, item 6):
each is now an error before any work, naming the key and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.conftest import run_command
from tests.run.test_pipeline import project_overrides


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["embedding=use_m3", "embedding.options.batch_size=0"],
            "embedding.options.batch_size=0 must be >= 1",
        ),
        (
            ["embedding=use_m3", "embedding.options.threads=0"],
            "embedding.options.threads=0 must be >= 1",
        ),
        (
            ["embedding=ollama", "embedding.options.batch_size=0"],
            "embedding.options.batch_size=0 must be >= 1",
        ),
        (["tracking.experiment="], "tracking.experiment='' must be a non-empty experiment name"),
        (["tracking.experiment='  '"], "tracking.experiment='  ' must be a non-empty"),
    ],
)
def test_never_validated_values_fail_before_work(
    tmp_path: Path, mini_project: Path, overrides: list[str], expected: str
) -> None:
    out = run_command(
        "ragsweep",
        f"paths.output_dir={tmp_path / 'out'}",
        *project_overrides(mini_project),
        *overrides,
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert f"error: {expected}" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "out" / "cache").exists()  # nothing was chunked or embedded
    assert not (tmp_path / "out" / "mlflow.db").exists()
    assert not list((tmp_path / "out").glob("runs/*/*/cases.jsonl"))


def test_an_empty_experiment_fails_a_multirun_before_any_job(
    tmp_path: Path, mini_project: Path
) -> None:
    out = run_command(
        "ragsweep",
        "-m",
        f"paths.output_dir={tmp_path / 'out'}",
        *project_overrides(mini_project),
        "tracking.experiment=",
        "chunking.size=100,140",
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert "error: tracking.experiment='' must be a non-empty experiment name" in out.stderr
    assert not list((tmp_path / "out").rglob("cases.jsonl"))
