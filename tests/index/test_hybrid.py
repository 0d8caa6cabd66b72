"""Hybrid retrieval: fusion rules, identity and hash, component rankings from the cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragsweep.config.app import plain_config
from ragsweep.core.errors import ConfigError
from ragsweep.index.base import Ranked
from ragsweep.index.fusion import FusionParams, fuse
from ragsweep.run.config import resolve
from tests.run.test_pipeline import evaluate, project_overrides


def ranked(indices: list[int], scores: list[float]) -> Ranked:
    return Ranked(np.array(indices, dtype=np.int64), np.array(scores, dtype=np.float32), 0.0)


SPARSE = ranked([3, 1, 7], [9.0, 5.0, 1.0])
DENSE = ranked([1, 4, 3], [0.9, 0.8, 0.2])


def test_rrf_sums_weighted_reciprocal_ranks() -> None:
    indices, scores = fuse(SPARSE, DENSE, "rrf", FusionParams(alpha=0.25, rrf_k=1.0), 10)
    expected = {
        1: 0.75 / 3 + 0.25 / 2,
        3: 0.75 / 2 + 0.25 / 4,
        7: 0.75 / 4,
        4: 0.25 / 3,
    }
    order = sorted(expected, key=lambda c: (-expected[c], c))
    assert indices.tolist() == order == [3, 1, 7, 4]
    np.testing.assert_allclose(scores, [expected[c] for c in order], rtol=1e-6)


def test_score_fusion_combines_min_max_normalized_scores() -> None:
    indices, scores = fuse(SPARSE, DENSE, "score", FusionParams(alpha=0.6, rrf_k=60.0), 2)
    # sparse normalized: 3 -> 1, 1 -> 0.5, 7 -> 0; dense: 1 -> 1, 4 -> 6/7, 3 -> 0
    expected = {1: 0.4 * 0.5 + 0.6, 4: 0.6 * 6 / 7, 3: 0.4, 7: 0.0}
    assert indices.tolist() == [1, 4]
    np.testing.assert_allclose(scores, [expected[1], expected[4]], rtol=1e-6)


def test_alpha_one_ranks_as_the_dense_side_alone() -> None:
    for fusion in ("rrf", "score"):
        indices, _ = fuse(SPARSE, DENSE, fusion, FusionParams(alpha=1.0, rrf_k=60.0), 2)
        assert indices.tolist() == [1, 4]


def hybrid_resolved(compose_config, project: Path, *extra: str):
    overrides = project_overrides(project, "embedding=hybrid", *extra)
    return resolve(plain_config(compose_config(*overrides)))


def test_identity_and_hash_cover_both_components(compose_config, mini_project: Path) -> None:
    base = hybrid_resolved(compose_config, mini_project)
    assert base.model.backend == "hybrid"
    assert base.model.name == ("bm25:bm25s-lucene+use_m3:universal-sentence-encoder-multilingual-3")
    assert base.model.options["dense"]["digest"]  # the USE weights digest is in it
    varied = {
        "embedding.options.alpha=0.3",
        "embedding.options.rrf_k=10",
        "embedding.options.fusion=score",
        "embedding.options.depth=50",
        "embedding.options.sparse={backend: bm25, options: {k1: 1.2}}",
        "embedding.options.sparse={backend: bm25, options: {cjk_ngram: 1}}",
    }
    hashes = {hybrid_resolved(compose_config, mini_project, o).config_hash for o in varied}
    assert len(hashes) == len(varied) and base.config_hash not in hashes
    same = hybrid_resolved(
        compose_config,
        mini_project,
        "embedding.options.dense={backend: use_m3, options: {threads: 1}}",
    )
    assert same.config_hash == base.config_hash  # threads change no vector


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("embedding.options.fusion=rf", r"embedding.options.fusion='rf' .*did you mean 'rrf'\?"),
        ("embedding.options.alpha=1.5", r"embedding.options.alpha=1.5 must be in \[0, 1\]"),
        (
            "embedding.options.dense={backend: use_m4}",
            r"embedding.options.dense.backend='use_m4' .*did you mean 'use_m3'\?",
        ),
        ("embedding.options.sparse={backend: hybrid}", r"sparse.backend cannot itself be hybrid"),
        (
            "embedding.options.dense=use_m2",
            r"dense='use_m2' is not one of: .*did you mean 'use_m3'\?",
        ),
        (
            "embedding.options.sparse={backend: bm25, options: {k11: 1}}",
            r"embedding.options.sparse.options.k11 is not a known key .*did you mean "
            r"embedding.options.sparse.options.k1\?",
        ),
        ("+embedding.options.alhpa=1", r"did you mean embedding.options.alpha\?"),
    ],
)
def test_bad_hybrid_configs_fail_before_any_work(
    compose_config, mini_project: Path, override: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        hybrid_resolved(compose_config, mini_project, override)


@pytest.mark.slow
def test_hybrid_run_fuses_cached_component_rankings(compose_config, mini_project: Path) -> None:
    off = "tracking.enabled=false"
    dense, _ = evaluate(compose_config, mini_project, "embedding=use_m3", off)
    pure, _ = evaluate(
        compose_config, mini_project, "embedding=hybrid", "embedding.options.alpha=1", off
    )

    # with all weight on the dense side the fused top 10 is the dense ranking
    def ids(result) -> list[list[str]]:
        return [[r.chunk_id for r in case.retrieved] for case in result.cases]

    assert ids(pure) == ids(dense)
    assert pure.cache_metrics["cache/rankings/misses"] == 3.0  # sparse, dense, fused

    mixed, _ = evaluate(
        compose_config, mini_project, "embedding=hybrid", "embedding.options.alpha=0.4", off
    )
    metrics = mixed.cache_metrics
    # a new alpha only fuses: both components' indexes and rankings come from the cache
    assert metrics["cache/rankings/hits"] == 2.0 and metrics["cache/rankings/misses"] == 1.0
    assert metrics["cache/bm25_index/hits"] == 1.0 and metrics["cache/dense_index/hits"] == 1.0
    assert metrics.get("cache/embeddings/misses", 0.0) == 0.0
    extra = mixed.summary.extra
    for stage in ("sparse", "dense", "fusion"):
        assert extra[f"latency_ms_p95/{stage}"] >= extra[f"latency_ms_p50/{stage}"] >= 0.0
    assert extra["latency_ms_p50/sparse"] > 0.0
    assert [c.retrieved for c in mixed.cases] != [c.retrieved for c in pure.cases]
