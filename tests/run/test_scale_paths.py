"""The fast paths the cost curve (bench/bench_scale.py) asked for give exactly what the plain
implementations they replaced give."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import numpy as np
import pytest

from ragsweep.cache.stage import StageCache
from ragsweep.chunk.chunkers import Chunk
from ragsweep.chunk.views import ChunkColumns
from ragsweep.config.app import plain_config
from ragsweep.config.schema import EvalConfig
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import GoldenCase, load_golden
from ragsweep.eval.scoring import (
    RetrievedChunk,
    _answerable_metrics,
    _retrieved,
    make_queries,
    retrieve,
    score_cases,
)
from ragsweep.index.backends.dense import build_dense_index
from ragsweep.index.base import IndexProvenance, Query, Ranked, scope_masker, top_k_rows
from ragsweep.index.encoding import ModelIdentity
from ragsweep.index.tokenize import _CJK_RUN, _TOKEN, TokenizerConfig, _ngrams, tokenize
from ragsweep.run.config import resolve, select_cases
from ragsweep.run.pipeline import build_index
from ragsweep.run.timer import Timer
from tests.conftest import ComposeFn

RAW = {"steps": []}
ALPHABET = "abcXYZ éøßДж_09 -.,!?\n\t" + "サーバ接続漢字한국ｶﾞ"


def reference_tokenize(text: str, cfg: TokenizerConfig) -> list[str]:
    """The tokenizer before its fast path: every match checked for a CJK run."""
    if cfg.lowercase:
        text = text.lower()
    tokens: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if _CJK_RUN.fullmatch(token):
            tokens.extend(_ngrams(token, cfg.cjk_ngram))
        else:
            tokens.append(token)
    return tokens


@pytest.mark.parametrize("cfg", [TokenizerConfig(), TokenizerConfig(False, 3)])
def test_tokenize_equals_reference_on_mixed_scripts(cfg: TokenizerConfig) -> None:
    rng = random.Random(17)
    texts = ["", "   ", "plain latin words only", "Ünïcödé 42 snake_case"]
    texts += ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 80))) for _ in range(400)]
    latin_only = [t for t in texts if not re.search(_CJK_RUN, t)]
    assert len(latin_only) > 3 and len(latin_only) < len(texts)  # both paths are exercised
    for text in texts:
        assert tokenize(text, cfg) == reference_tokenize(text, cfg), text


def reference_score_cases(
    cases: Sequence[GoldenCase], ranked: Sequence[Ranked], chunks: Sequence[Chunk], cfg: EvalConfig
) -> list[tuple[str, dict[str, float] | None, tuple[RetrievedChunk, ...]]]:
    """Scoring before it was restricted to the retrieved chunks: the table of every chunk."""
    every = ChunkColumns.of(chunks)
    metrics, _ = _answerable_metrics(cases, ranked, every, chunks, cfg)
    retrieved = _retrieved(ranked, every)
    return [(case.id, metrics.get(i), retrieved[i]) for i, case in enumerate(cases)]


@pytest.mark.parametrize("embedding", ["bm25", "custom"])
def test_scoring_the_retrieved_chunks_equals_scoring_against_every_chunk(
    compose_config: ComposeFn, embedding: str
) -> None:
    extra = (
        ["embedding.options._target_=tests.custom_retriever.TfidfRetriever"]
        if embedding == "custom"
        else []
    )
    resolved = resolve(
        plain_config(
            compose_config(
                f"embedding={embedding}", "cache.enabled=false", "chunking.size=300", *extra
            )
        )
    )
    cfg = resolved.cfg
    corpus = load_corpus(cfg.corpus)
    cases = select_cases(load_golden(cfg.golden, corpus), cfg.eval.split)
    built = build_index(resolved, corpus, StageCache(None), Timer())
    mask = scope_masker([c.doc for c in built.chunks])
    queries = make_queries(cases, resolved.preprocessor, mask)
    ranked = retrieve(queries, built.index, resolved.preprocessor.identity, cfg.top_k)
    assert len({int(i) for r in ranked for i in r.indices}) < len(built.chunks)  # a subset
    results = score_cases(cases, ranked, built.chunks, cfg.eval)
    expected = reference_score_cases(cases, ranked, built.chunks, cfg.eval)
    assert [(r.id, r.metrics, r.retrieved) for r in results] == expected
    assert any(r.metrics for r in results) and any(r.metrics is None for r in results)


def test_scope_masks_by_document_code_equal_masks_by_document_id() -> None:
    rng = random.Random(3)
    docs = [f"d{i}.md" for i in range(40)]
    chunk_docs = [rng.choice(docs) for _ in range(2_000)]
    mask = scope_masker(chunk_docs)
    assert mask(None) is None
    scopes = [rng.sample(docs, rng.randint(1, 6)) for _ in range(50)]
    scopes += [[], ["not-a-chunked-doc.md"], ["d1.md", "not-a-chunked-doc.md"]]
    for scope in scopes:
        expected = np.isin(np.asarray(chunk_docs, dtype=object), scope)  # the plain way
        got = mask(scope)
        assert got is not None and got.dtype == bool
        assert np.array_equal(got, expected), scope
    assert mask(list(reversed(scopes[0]))) is mask(scopes[0])  # memoized by the set of docs


class TableEmbedder:
    """Query vectors looked up by query text (a real embedder would compute them)."""

    def __init__(self, identity: ModelIdentity, table: dict[str, np.ndarray]) -> None:
        self.identity = identity
        self.table = table

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


def reference_dense_search(
    vectors: np.ndarray, query_vectors: np.ndarray, allowed: list[np.ndarray | None], k: int
) -> list[tuple[list[int], list[float]]]:
    """Every score of every query in one product, one selection per row."""
    scores = query_vectors @ vectors.T
    for row, mask in enumerate(allowed):
        if mask is not None:
            scores[row, ~mask] = -np.inf
    return [
        (picked.tolist(), scores[row, picked].tolist())
        for row, picked in enumerate(top_k_rows(scores, k, -np.inf))
    ]


@pytest.mark.parametrize("cells", [4_000_000, 700, 64, 1])
@pytest.mark.parametrize("k", [1, 5, 40])
def test_dense_search_by_chunk_blocks_equals_one_selection_over_every_chunk(
    monkeypatch: pytest.MonkeyPatch, cells: int, k: int
) -> None:
    # Small integer vectors: every dot product is exact in float32 whatever the blocking,
    # and many scores tie, so the tie order (by chunk index) is checked across blocks.
    rng = np.random.default_rng(5)
    n_chunks, dim = 300, 4
    vectors = rng.integers(-2, 3, size=(n_chunks, dim)).astype(np.float32)
    identity = ModelIdentity("toy", "toy", "1", dim, True)
    texts = [f"q{i}" for i in range(23)]
    table = {t: rng.integers(-2, 3, size=dim).astype(np.float32) for t in texts}
    allowed = [None if i % 3 else rng.random(n_chunks) < 0.3 for i in range(len(texts))]
    allowed[4] = np.zeros(n_chunks, dtype=bool)  # a scope with no chunk at all
    monkeypatch.setattr("ragsweep.index.backends.dense.SCORE_BLOCK_CELLS", cells)
    index = build_dense_index(
        vectors,
        TableEmbedder(identity, table),
        IndexProvenance(identity, {"steps": []}, "c", "h", n_chunks),
    )
    ranked = index.search([Query(t, a) for t, a in zip(texts, allowed, strict=True)], k, RAW)
    expected = reference_dense_search(vectors, np.stack([table[t] for t in texts]), allowed, k)
    assert [(r.indices.tolist(), r.scores.tolist()) for r in ranked] == expected
    assert ranked[4].indices.size == 0 and all(r.indices.size for r in ranked[5:7])
