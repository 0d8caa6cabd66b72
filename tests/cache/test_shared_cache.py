"""One stage cache shared by several workers (docs/caching.md, "Sharing a cache between
workers"): jobs launched at once on a cold cache build every shared entry once, and a
writer that the per-key lock did not exclude (locks that do not reach across hosts) costs
duplicated work, never a torn or doubled entry."""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.cache.entries import verify_entry
from ragsweep.cache.stage import StageCache
from ragsweep.cli.cache import iter_entries
from ragsweep.release.store import RunStore
from ragsweep.run.files import CASES_STAGE, LINES_STAGE
from ragsweep.run.scored import SCORES_STAGE
from tests.cli.test_cli import RAGSWEEP
from tests.cluster_support import worker_env
from tests.run.test_pipeline import project_overrides

SHARED_STAGES = ("chunks", "texts", "bm25_index", "rankings")
SEARCHED_ONLY = ("texts", "bm25_index")
"""Read only to search: jobs that find the rankings cached never open them."""
OVERLAPS = ("0.25", "0.5", "0.75", "1.0")


@pytest.mark.slow
def test_parallel_jobs_on_a_cold_cache_build_each_shared_entry_once(
    tmp_path: Path, mini_project: Path
) -> None:
    # four jobs that differ only in scoring: every stage key is the same for all of them
    cache = tmp_path / "shared-cache"
    out = subprocess.run(
        [
            str(RAGSWEEP),
            "-m",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=4",
            f"paths.output_dir={tmp_path / 'outputs'}",
            f"hydra.sweep.dir={tmp_path / 'grid'}",
            f"cache.dir={cache}",
            *project_overrides(mini_project),
            f"eval.min_span_overlap={','.join(OVERLAPS)}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=worker_env(),
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "another worker stored" not in out.stderr  # the locks excluded each other

    uri = f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"
    client = MlflowClient(uri)
    runs = client.search_runs(client.get_experiment_by_name("ragsweep").experiment_id)
    assert sorted(r.data.params["eval.min_span_overlap"] for r in runs) == list(OVERLAPS)
    store = RunStore(uri)  # cache counters are in each run's figures.json, not its metrics
    figures = [store.get(r.info.run_id).metrics for r in runs]
    for stage in SHARED_STAGES:
        misses = [f.get(f"cache/{stage}/misses", 0) for f in figures]
        hits = [f.get(f"cache/{stage}/hits", 0) for f in figures]
        assert sorted(misses) == [0, 0, 0, 1], stage  # one job built it ...
        if stage in SEARCHED_ONLY:  # ... the others read the rankings: no index needed
            assert hits == [0, 0, 0, 0], stage
        else:
            assert sorted(hits) == [0, 1, 1, 1], stage  # ... the others read its entry
        assert all(f.get(f"cache/{stage}/corrupt", 0) == 0 for f in figures)

    # scored differently (another min_span_overlap): each job scores its own result
    assert [f.get(f"cache/{SCORES_STAGE}/misses", 0) for f in figures] == [1, 1, 1, 1]

    entries = list(iter_entries(cache))
    # one entry per key: the four jobs' files share one chunk_lines entry too (same chunks);
    # each job's scored result and case files are its own (another min_span_overlap)
    per_job = [SCORES_STAGE, CASES_STAGE] * len(OVERLAPS)
    assert sorted(e.stage for e in entries) == sorted([*SHARED_STAGES, LINES_STAGE, *per_job])
    for entry in entries:
        verify_entry(entry.path)  # complete: every file matches its checksum
    assert not list(cache.rglob(".tmp-*")) and not list(cache.rglob(".trash-*"))


def test_a_writer_the_lock_did_not_exclude_leaves_one_whole_entry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What a worker on another host does when the file system's locks do not reach it:
    it builds and stores the same key while this process is building it."""
    this, other = StageCache(tmp_path), StageCache(tmp_path)
    stage, key = "texts", "ab" * 32

    def write_texts(folder: Path) -> None:
        (folder / "texts.json").write_text('["same", "inputs"]', encoding="utf-8")

    def build_while_another_stores(folder: Path) -> None:
        other._write_entry(stage, other.entry_dir(stage, key), write_texts, key)
        write_texts(folder)

    with caplog.at_level(logging.WARNING, logger="ragsweep.cache.stage"):
        text = this.get_or_build(
            stage, key, build_while_another_stores, lambda f: (f / "texts.json").read_text()
        )
    assert text == '["same", "inputs"]'
    assert "another worker stored" in caplog.text
    (entry,) = list(iter_entries(tmp_path))  # one entry, the other writer's, whole
    assert verify_entry(entry.path)["key"] == key
    assert not list(tmp_path.rglob(".tmp-*"))
    assert this.stats.stage(stage).misses == 1  # this process did the work (twice over)

    again = StageCache(tmp_path)  # a later run reads it
    assert again.get_or_build(stage, key, write_texts, lambda f: "hit") == "hit"
    assert again.stats.stage(stage).hits == 1
