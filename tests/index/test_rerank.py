"""The reranking stage with a real (tiny, randomly initialized) cross-encoder built in a
temporary folder and loaded through ``CrossEncoder``."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.config.app import plain_config
from ragsweep.core.errors import ConfigError
from ragsweep.index.st_models import folder_digest
from ragsweep.run.config import resolve
from tests.run.test_pipeline import evaluate, project_overrides
from tests.st_support import needs_st, tiny_cross_encoder

pytestmark = needs_st


@pytest.fixture(scope="module")
def reranker_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce") / "tiny-ce")


def rerank_overrides(folder: Path, *extra: str) -> tuple[str, ...]:
    return (
        "rerank=cross_encoder",
        f"rerank.model={folder}",
        "eval.ks=[1,3]",
        "eval.budgets=[]",  # the tiny chunks would need a 40-deep ranking to fill 4,000 chars
        "eval.objective=recall_at_3",
        *extra,
    )


def resolved(compose_config, project: Path, *extra: str):
    return resolve(plain_config(compose_config(*project_overrides(project, *extra))))


def test_identity_and_hash(compose_config, mini_project: Path, reranker_folder: Path) -> None:
    plain = resolved(compose_config, mini_project, "eval.ks=[1,3]", "eval.objective=recall_at_3")
    off = resolved(
        compose_config, mini_project, "eval.ks=[1,3]", "eval.objective=recall_at_3", "rerank=off"
    )
    assert plain.reranker is None and off.config_hash == plain.config_hash
    on = resolved(compose_config, mini_project, *rerank_overrides(reranker_folder))
    assert on.reranker is not None
    assert on.reranker.name == "tiny-ce"
    assert on.reranker.digest == folder_digest(reranker_folder)
    deeper = resolved(
        compose_config, mini_project, *rerank_overrides(reranker_folder, "rerank.candidates=30")
    )
    threads = resolved(
        compose_config, mini_project, *rerank_overrides(reranker_folder, "rerank.threads=1")
    )
    assert len({plain.config_hash, on.config_hash, deeper.config_hash}) == 3
    assert threads.config_hash == on.config_hash


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("rerank=cross_encoder",), r"rerank.model must name a cross-encoder"),
        (("rerank=cross_encoder", "rerank.model=/no/such/ce"), r"rerank.model='/no/such/ce'"),
        (("rerank.candidates=2",), r"rerank.candidates=2 must be >= the chunks kept .*\(3"),
        (("+rerank.candidate=5",), r"did you mean rerank.candidates\?"),
    ],
)
def test_bad_rerank_configs_fail_before_work(
    compose_config, mini_project: Path, reranker_folder: Path, extra: tuple[str, ...], message: str
) -> None:
    base = rerank_overrides(reranker_folder)[1:] if extra[0] != "rerank=cross_encoder" else ()
    overrides = (
        ("rerank=cross_encoder", *base, *extra)
        if base
        else ("eval.ks=[1,3]", "eval.budgets=[]", "eval.objective=recall_at_3", *extra)
    )
    with pytest.raises(ConfigError, match=message):
        resolved(compose_config, mini_project, *overrides)


@pytest.mark.slow
def test_reranked_order_is_the_cross_encoders(
    compose_config, mini_project: Path, reranker_folder: Path
) -> None:
    from sentence_transformers import CrossEncoder

    off = "tracking.enabled=false"
    first, _ = evaluate(
        compose_config,
        mini_project,
        "eval.ks=[1,3]",
        "eval.budgets=[]",
        "eval.objective=recall_at_3",
        "retrieval.top_k=5",
        off,
    )
    reranked, _ = evaluate(
        compose_config,
        mini_project,
        *rerank_overrides(reranker_folder, "rerank.candidates=5", "retrieval.top_k=5", off),
    )
    model = CrossEncoder(str(reranker_folder), device="cpu", local_files_only=True)
    texts = {
        p.relative_to(mini_project / "corpus").as_posix(): p.read_text("utf-8")
        for p in (mini_project / "corpus").rglob("*.md")
    }
    question = {
        "q1": "How long do refunds take?",
        "q2": "How do I export my notes?",
        "q3": "VPN サーバー",
        "q4": "Is there a pony?",
    }
    reordered = 0
    for before, after in zip(first.cases, reranked.cases, strict=True):
        chunks = [texts[r.doc][r.start : r.end] for r in before.retrieved]
        scores = model.predict([(question[before.id], c) for c in chunks]).tolist()
        expected = sorted(range(len(chunks)), key=lambda i: (-scores[i], i))
        got = [r.chunk_id for r in after.retrieved]
        assert got == [before.retrieved[i].chunk_id for i in expected]
        assert [r.score for r in after.retrieved] == pytest.approx(
            [scores[i] for i in expected], abs=1e-5
        )
        reordered += got != [r.chunk_id for r in before.retrieved]
    assert reordered > 0  # the reranker did change an order
    extra = reranked.summary.extra
    assert extra["latency_ms_p50/rerank"] > 0.0
    assert extra["latency_ms_p95/search"] >= extra["latency_ms_p50/search"]


TOP1 = ("eval.ks=[1]", "eval.objective=recall_at_1")


@pytest.mark.slow
def test_candidate_sweep_scores_each_pair_once(
    compose_config, mini_project: Path, reranker_folder: Path, tracking_db: Path
) -> None:
    shallow, _ = evaluate(
        compose_config,
        mini_project,
        *rerank_overrides(reranker_folder, *TOP1, "rerank.candidates=1", "tracking.enabled=false"),
    )
    assert shallow.cache_metrics["cache/rerank_scores/hits"] == 0.0
    computed = shallow.cache_metrics["cache/rerank_scores/misses"]
    assert computed > 0
    deep, resolved_cfg = evaluate(
        compose_config,
        mini_project,
        *rerank_overrides(reranker_folder, *TOP1, "rerank.candidates=3"),
    )
    metrics = deep.cache_metrics
    assert metrics["cache/rerank_scores/hits"] == computed  # each query's first candidate
    assert metrics["cache/rerank_scores/misses"] > 0  # ranks 2 and 3 are new
    again, _ = evaluate(
        compose_config,
        mini_project,
        *rerank_overrides(reranker_folder, *TOP1, "rerank.candidates=3"),
    )
    assert again.cache_metrics["cache/rerank_scores/misses"] == 0.0
    assert [c.retrieved for c in again.cases] == [c.retrieved for c in deep.cases]
    # a pair keeps the time it took: a query's rerank latency is the same on a hit
    assert again.summary.extra["latency_ms_p95/rerank"] == pytest.approx(
        deep.summary.extra["latency_ms_p95/rerank"]
    )
    client = MlflowClient(tracking_uri="sqlite:///" + resolved_cfg["tracking"]["default_db"])
    logged = client.get_run(deep.run_id).data.metrics
    assert logged["latency_ms_p95/rerank"] == pytest.approx(
        deep.summary.extra["latency_ms_p95/rerank"]
    )
    assert "latency_ms_p95/rerank" in (deep.output_dir / "report.md").read_text("utf-8")
