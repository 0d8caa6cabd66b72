"""``ragsweep embed --shard I/N``: workers split the embedding of one configuration over a
shared cache (docs/deploy.md, "Splitting the embedding of one configuration")."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ragsweep.cli.embed_shard import Shard
from ragsweep.config.app import plain_config
from ragsweep.core.errors import ConfigError
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import RunResult, run_evaluation
from tests.cli.test_cli import RAGSWEEP
from tests.run.test_pipeline import project_overrides

DENSE = ("embedding=use_m3", "tracking.enabled=false")


def test_the_parts_are_disjoint_and_cover_every_text() -> None:
    texts = [f"chunk {i}" for i in range(200)] + ["chunk 7"]  # a duplicate counts once
    parts = [Shard(i, 3).part(texts) for i in (1, 2, 3)]
    assert sorted(t for part in parts for t in part) == sorted(set(texts))
    assert all(30 < len(part) < 100 for part in parts)  # spread by hash, not by position
    assert Shard.parse(" 2/3 ") == Shard(2, 3)
    for bad in ("0/2", "3/2", "1", "a/b", "1/0"):
        with pytest.raises(ConfigError, match="must be I/N"):
            Shard.parse(bad)


def evaluate(compose_config, project: Path, cache: Path) -> RunResult:
    cfg = compose_config(*project_overrides(project, *DENSE, f"cache.dir={cache}"))
    return run_evaluation(resolve(plain_config(cfg)), project / f"run-{cache.name}")


@pytest.mark.slow
def test_two_workers_embed_halves_and_the_run_embeds_nothing(
    compose_config, mini_project: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared-cache"
    overrides = [
        *project_overrides(mini_project, *DENSE),
        f"cache.dir={shared}",
        f"paths.output_dir={tmp_path / 'outputs'}",
    ]
    workers = [
        subprocess.Popen(
            [str(RAGSWEEP), "embed", f"--shard={i}/2", *overrides],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
        )
        for i in (1, 2)
    ]  # at once, on one cache folder
    said = [w.communicate(timeout=300) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], [err[-2000:] for _, err in said]
    lines = [out.strip() for out, _ in said]
    assert lines[0].startswith("shard 1/2: ") and lines[1].startswith("shard 2/2: ")
    # the halves split the 3 distinct chunk texts and 4 questions of the test corpus
    chunk_parts = [int(line.split(": ")[1].split(" of ")[0]) for line in lines]
    assert sum(chunk_parts) == 3 and all("of 3 distinct chunk texts" in line for line in lines)

    split = evaluate(compose_config, mini_project, shared)
    assert split.cache_metrics["cache/embeddings/misses"] == 0  # every vector was cached
    assert split.cache_metrics["cache/embeddings/hits"] == 3
    assert split.cache_metrics["cache/query_embeddings/misses"] == 0
    assert split.cache_metrics["cache/query_embeddings/hits"] == 4

    alone = evaluate(compose_config, mini_project, tmp_path / "one-process-cache")
    assert alone.cache_metrics["cache/embeddings/misses"] == 3
    assert split.summary.overall == alone.summary.overall
    assert len(split.cases) == len(alone.cases)
    for a, b in zip(split.cases, alone.cases, strict=True):
        assert (a.id, a.metrics) == (b.id, b.metrics)
        assert [r.chunk_id for r in a.retrieved] == [r.chunk_id for r in b.retrieved]
        assert [r.score for r in a.retrieved] == pytest.approx([r.score for r in b.retrieved])
