"""Tokenizer, top-k selection, scope masks, BM25 and dense indexes, drift errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ragsweep.core.errors import DriftError
from ragsweep.index.backends.bm25 import BM25Options, bm25_identity, build_bm25_index
from ragsweep.index.backends.dense import build_dense_index
from ragsweep.index.base import (
    IndexProvenance,
    Query,
    scope_masker,
    top_k_indices,
    top_k_rows,
)
from ragsweep.index.encoding import ModelIdentity, l2_normalize
from ragsweep.index.tokenize import TokenizerConfig, tokenize


def test_tokenizer_words_and_cjk_bigrams() -> None:
    assert tokenize("Sign-in failed", TokenizerConfig()) == ["sign", "in", "failed"]
    assert tokenize("サーバー接続", TokenizerConfig()) == ["サー", "ーバ", "バー", "ー接", "接続"]
    assert tokenize("VPN接続 ok", TokenizerConfig(cjk_ngram=3)) == ["vpn", "接続", "ok"]
    assert tokenize("Mixed", TokenizerConfig(lowercase=False)) == ["Mixed"]


def test_top_k_orders_by_score_then_index_and_drops_floor() -> None:
    scores = np.array([0.5, 0.9, 0.5, 0.0, 0.7], dtype=np.float32)
    assert top_k_indices(scores, 3, 0.0).tolist() == [1, 4, 0]
    assert top_k_indices(scores, 10, 0.0).tolist() == [1, 4, 0, 2]
    assert top_k_indices(scores, 10, -np.inf).tolist() == [1, 4, 0, 2, 3]


@pytest.mark.parametrize("k", [1, 3, 8, 40])
@pytest.mark.parametrize("min_score", [-np.inf, 0.0])
def test_top_k_rows_gives_every_row_what_top_k_indices_gives_it(k: int, min_score: float) -> None:
    rng = np.random.default_rng(5)
    # Few distinct values make ties at the k-th place common; -inf marks out-of-scope
    # chunks, and some rows have fewer than k chunks above the floor.
    scores = rng.integers(-3, 4, size=(200, 30)).astype(np.float32) / 4
    scores[rng.random(scores.shape) < 0.3] = -np.inf
    scores[:5, 3:] = -np.inf
    rows = top_k_rows(scores, k, min_score)
    assert len(rows) == 200
    for row, picked in zip(scores, rows, strict=True):
        assert picked.tolist() == top_k_indices(row, k, min_score).tolist()


def test_top_k_rows_of_distinct_scores_and_of_nothing() -> None:
    scores = np.array([[0.1, 0.9, 0.5], [0.3, 0.2, 0.1]], dtype=np.float32)
    assert [r.tolist() for r in top_k_rows(scores, 2, -np.inf)] == [[1, 2], [0, 1]]
    assert top_k_rows(np.zeros((0, 3), dtype=np.float32), 2, 0.0) == []
    assert [r.tolist() for r in top_k_rows(np.zeros((2, 0), dtype=np.float32), 2, 0.0)] == [
        [],
        [],
    ]


RAW = {"steps": []}


def provenance(model: ModelIdentity, n: int) -> IndexProvenance:
    return IndexProvenance(
        model=model, preprocess={"steps": []}, chunking_key="c", corpus_hash="h", n_chunks=n
    )


BM25_ID = bm25_identity(BM25Options())


def test_bm25_ranks_matching_chunks_and_respects_scope() -> None:
    texts = ["refunds are issued in 14 days", "export notes as zip", "refunds refunds policy"]
    index = build_bm25_index(texts, BM25Options(), provenance(BM25_ID, 3))
    mask = scope_masker(["a.md", "b.md", "c.md"])
    (ranked,) = index.search([Query("refunds")], 5, RAW)
    assert ranked.indices.tolist() == [2, 0]  # the export chunk shares no token
    (scoped,) = index.search([Query("refunds", mask(["a.md"]))], 5, RAW)
    assert scoped.indices.tolist() == [0]
    (empty,) = index.search([Query("???")], 5, RAW)
    assert empty.indices.size == 0


class FakeEncoder:
    """A deterministic query embedder: exercises exact search and the drift check's wiring."""

    def __init__(self, identity: ModelIdentity) -> None:
        self.identity = identity

    def embed(self, texts):
        return l2_normalize(np.array([[len(t), 1.0] for t in texts], dtype=np.float32))


DENSE_ID = ModelIdentity("toy", "toy", "1", 2, True)


def test_dense_search_is_exact_cosine() -> None:
    vectors = l2_normalize(np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32))
    index = build_dense_index(vectors, FakeEncoder(DENSE_ID), provenance(DENSE_ID, 3))
    (ranked,) = index.search([Query("abcdefghij")], 3, RAW)
    assert ranked.indices.tolist() == [0, 2, 1]
    assert ranked.scores[0] == pytest.approx(10 / np.sqrt(101), rel=1e-6)


def test_dense_search_of_a_batch_respects_each_query_scope() -> None:
    vectors = l2_normalize(np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32))
    index = build_dense_index(vectors, FakeEncoder(DENSE_ID), provenance(DENSE_ID, 3))
    only_second = np.array([False, True, False])
    ranked = index.search(
        [Query("abcdefghij"), Query("abcdefghij", only_second), Query("a")], 2, RAW
    )
    assert [r.indices.tolist() for r in ranked] == [[0, 2], [1], [2, 0]]  # 0 ties 1: by index
    assert all(r.seconds == ranked[0].seconds > 0 for r in ranked)  # the batch's share


@pytest.mark.parametrize("field", ["version", "dimension", "normalized", "name", "digest"])
def test_query_side_drift_is_a_hard_error(field: str) -> None:
    changed = {
        "version": "2",
        "dimension": 3,
        "normalized": False,
        "name": "other",
        "digest": "abc",
    }[field]
    query_side = dataclasses.replace(DENSE_ID, **{field: changed})
    vectors = l2_normalize(np.eye(2, dtype=np.float32))
    index = build_dense_index(vectors, FakeEncoder(query_side), provenance(DENSE_ID, 2))
    with pytest.raises(DriftError) as info:
        index.search([Query("q")], 1, RAW)
    assert f"embedding drift ({field})" in str(info.value)  # exactly the differing field
    assert "toy:toy v1" in str(info.value)  # names the index side


def test_vector_shape_must_match_provenance() -> None:
    with pytest.raises(DriftError, match="shape"):
        build_dense_index(
            np.zeros((3, 2), np.float32), FakeEncoder(DENSE_ID), provenance(DENSE_ID, 2)
        )


@pytest.mark.parametrize("kind", ["bm25", "dense"])
def test_queries_preprocessed_differently_from_the_index_are_refused(kind: str) -> None:
    if kind == "bm25":
        index = build_bm25_index(["alpha"], BM25Options(), provenance(BM25_ID, 1))
    else:
        vectors = l2_normalize(np.eye(2, dtype=np.float32))
        index = build_dense_index(vectors, FakeEncoder(DENSE_ID), provenance(DENSE_ID, 2))
    with pytest.raises(DriftError, match="preprocessing drift"):
        index.search([Query("ALPHA")], 1, {"steps": ["casefold"]})


def test_bm25_options_differing_from_the_index_are_refused() -> None:
    index = build_bm25_index(["alpha"], BM25Options(k1=1.2), provenance(BM25_ID, 1))
    with pytest.raises(DriftError, match="options"):
        index.search([Query("alpha")], 1, RAW)


def test_dense_search_in_small_blocks_gives_the_same_rankings(monkeypatch) -> None:
    rng = np.random.default_rng(3)
    vectors = l2_normalize(rng.normal(size=(40, 2)).astype(np.float32))
    index = build_dense_index(vectors, FakeEncoder(DENSE_ID), provenance(DENSE_ID, 40))
    queries = [Query("x" * n, None if n % 3 else rng.random(40) < 0.5) for n in range(1, 30)]
    whole = index.search(queries, 5, RAW)
    monkeypatch.setattr(
        "ragsweep.index.backends.dense.SCORE_BLOCK_CELLS", 100
    )  # two queries per block
    blocked = index.search(queries, 5, RAW)
    assert [r.indices.tolist() for r in blocked] == [r.indices.tolist() for r in whole]
    assert [r.scores.tolist() for r in blocked] == [r.scores.tolist() for r in whole]
