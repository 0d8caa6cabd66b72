"""Hydra's own errors (issue 12, item 8): a mistyped key or an unknown config group option
gets a did-you-mean and exit status 2, like ragsweep's own config errors, without a
traceback and before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.conftest import run_command
from tests.run.test_pipeline import project_overrides


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "chunking.sise=400",
            "error: chunking.sise is not a known key (allowed: heading_prefix, mode, overlap, "
            "size, title_prefix, tokenizer, unit); did you mean chunking.size?",
        ),
        (
            "chunking=headings",
            "error: chunking='headings' is not one of: fixed, heading, paragraph, recursive, "
            "semantic, sentence; did you mean "
            "'heading'?",
        ),
        ("chunkng.size=400", "error: chunkng is not a known key (allowed: cache, chunking,"),
        (
            "hydra/launcher=jobilb",
            # the list holds every installed launcher plugin (the cluster extra adds ray, ...)
            "error: hydra/launcher='jobilb' is not one of: basic, joblib",
        ),
        ("embedding=bm26", "error: embedding='bm26' is not one of: ann, bm25, custom, external"),
        ("chunking.size=[1", "error: no viable alternative at input '[1'"),
    ],
)
def test_hydra_errors_get_a_suggestion_and_exit_2(
    tmp_path: Path, mini_project: Path, override: str, expected: str
) -> None:
    out = run_command(
        "ragsweep",
        f"paths.output_dir={tmp_path / 'out'}",
        *project_overrides(mini_project),
        override,
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.startswith(expected), out.stderr
    if override.startswith("hydra/launcher="):
        assert "did you mean 'joblib'?" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "HYDRA_FULL_ERROR" not in out.stderr
    assert not (tmp_path / "out").exists()


def test_a_mistyped_key_in_a_grid_exits_2_before_any_job(
    tmp_path: Path, mini_project: Path
) -> None:
    out = run_command(
        "ragsweep",
        "-m",
        f"paths.output_dir={tmp_path / 'out'}",
        *project_overrides(mini_project),
        "tracking=off",  # creating a fresh MLflow store first would only cost time
        "chunking.sise=100,140",
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert "error: chunking.sise is not a known key" in out.stderr
    assert "did you mean chunking.size?" in out.stderr
    assert not list((tmp_path / "out").rglob("cases.jsonl"))
