"""``embedding=ann``: faiss HNSW over use_m3 vectors, and the recall it logs against exact
search on the run's own questions (skipped without the ``ann`` extra)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ragsweep.config.app import plain_config
from ragsweep.core.errors import ConfigError, ContractError
from ragsweep.index.backends.ann import AnnIndex
from ragsweep.index.backends.dense import DenseIndex
from ragsweep.index.base import IndexProvenance, Query
from ragsweep.index.encoding import ModelIdentity
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import run_evaluation

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("faiss") is None, reason="extra not installed: pip install -e '.[ann]'"
)
OFF = "tracking.enabled=false"


class NarrowerModel:
    """A query model whose vectors are 3 wide, as a changed model under the same identity."""

    identity = ModelIdentity("sentence_transformers", "mini", "1", 4, True)

    def embed(self, texts):
        return np.ones((len(texts), 3), dtype=np.float32) / np.sqrt(3)


def test_a_query_of_another_width_is_a_contract_error_on_the_graph_path() -> None:
    faiss = pytest.importorskip("faiss")

    vectors = np.eye(4, dtype=np.float32)
    graph = faiss.IndexHNSWFlat(4, 8, faiss.METRIC_INNER_PRODUCT)
    graph.add(vectors)
    model = NarrowerModel()
    provenance = IndexProvenance(model.identity, {}, "chunks", "corpus", 4)
    index = AnnIndex(provenance, DenseIndex(provenance, vectors, model), graph, 8)
    with pytest.raises(ContractError, match="query embedding dimension 3 is not the index's 4"):
        index.search([Query("q")], 2, {})


def test_identity_covers_base_and_graph(compose_config) -> None:
    def resolved(*extra: str):
        return resolve(plain_config(compose_config("embedding=ann", OFF, *extra)))

    base = resolved()
    assert base.model.name == "hnsw:use_m3:universal-sentence-encoder-multilingual-3"
    assert base.model.dimension == 512 and base.model.options["base"]["digest"]
    hashes = {
        resolved(o).config_hash for o in ("embedding.options.m=8", "embedding.options.ef_search=8")
    }
    assert len(hashes | {base.config_hash}) == 3
    with pytest.raises(ConfigError, match=r"base='bm25' is not a dense backend"):
        resolved("embedding.options.base=bm25")
    with pytest.raises(ConfigError, match=r"embedding.options.ef_search=0 must be >= 1"):
        resolved("embedding.options.ef_search=0")


@pytest.mark.slow
def test_logged_recall_is_the_overlap_with_exact_search(compose_config, tmp_path) -> None:
    def run(*extra: str):
        resolved = resolve(plain_config(compose_config(OFF, *extra)))
        return run_evaluation(resolved, tmp_path / "-".join(extra))

    exact = run("embedding=use_m3")
    # a deliberately poor graph, so that the approximation misses neighbours
    sparse_graph = ("embedding.options.m=2", "embedding.options.ef_construction=2")
    poor = run("embedding=ann", *sparse_graph, "embedding.options.ef_search=1")
    good = run("embedding=ann")
    overlap = [
        len({r.chunk_id for r in a.retrieved} & {r.chunk_id for r in e.retrieved})
        / len(e.retrieved)
        for a, e in zip(poor.cases, exact.cases, strict=True)
    ]
    recall = poor.summary.extra["ann/recall_at_10"]
    assert recall == pytest.approx(float(np.mean(overlap)))
    assert recall < good.summary.extra["ann/recall_at_10"] <= 1.0
    assert good.summary.extra["ann/recall_at_10"] >= 0.95
    # searched again from the cache, the recall is measured again, not lost
    again = run("embedding=ann", *sparse_graph, "embedding.options.ef_search=1")
    assert again.cache_metrics["cache/rankings/hits"] == 1.0
    assert again.summary.extra["ann/recall_at_10"] == recall
