"""chunking.mode=semantic: sentences embedded with a real model (USE v3, the fallback for
BM25), chunks cut at breakpoints and at the size cap, offsets exact, the sentence model in
the chunks key and the config hash."""

from __future__ import annotations

import numpy as np
import pytest

from ragsweep.cache.stage import StageCache
from ragsweep.chunk.chunkers import NO_TOOLS, ChunkTools, chunk_corpus
from ragsweep.chunk.semantic import breakpoints, sentence_spans
from ragsweep.config.app import compose, plain_config
from ragsweep.config.schema import ChunkingConfig, EmbeddingConfig
from ragsweep.data.corpus import Corpus, Document
from ragsweep.index.semantic import (
    FALLBACK_EMBEDDING,
    semantic_embedding,
    semantic_identity,
    sentence_model_line,
    with_sentence_embedder,
)
from ragsweep.index.stages import chunks_key
from ragsweep.run.config import resolve

TEXT = (
    "Refunds are issued within fourteen days. Refunds go to the original payment method. "
    "A refund can be asked for in the billing page.\n\n"
    "The cathedral was built in the twelfth century. Its towers are ninety metres high! "
    "Pilgrims visited it for centuries? 大聖堂は有名です。観光客が多い。"
)


def test_sentences_and_breakpoints() -> None:
    spans = sentence_spans(TEXT)
    texts = [TEXT[s:e] for s, e in spans]
    assert texts[0] == "Refunds are issued within fourteen days."
    assert texts[-2:] == ["大聖堂は有名です。", "観光客が多い。"]
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    assert breakpoints(vectors, 50) == {1}
    line = sentence_model_line(ChunkingConfig("semantic"), EmbeddingConfig("bm25"))
    assert line is not None and "use_m3" in line and "fallback" in line  # the run summary's
    assert sentence_model_line(ChunkingConfig("fixed"), EmbeddingConfig("bm25")) is None


@pytest.mark.slow  # loads USE v3 (shared with the use_m3 tests in one process)
def test_semantic_chunks_with_the_fallback_model(tmp_path) -> None:
    cfg = ChunkingConfig("semantic", 120, 0, breakpoint_percentile=80)
    assert semantic_embedding(cfg, EmbeddingConfig("bm25")) == FALLBACK_EMBEDDING
    resolved = resolve(plain_config(compose(["tracking=off", "chunking=semantic"])))
    fallback = semantic_identity(cfg, EmbeddingConfig("bm25"))
    assert fallback is not None and resolved.chunk_tools.embedder == fallback.key
    plain = resolve(plain_config(compose(["tracking=off", "chunking=recursive"])))
    assert resolved.config_hash != plain.config_hash
    cache = StageCache(tmp_path)
    tools = with_sentence_embedder(resolved.chunk_tools, cfg, EmbeddingConfig("bm25"), cache)
    corpus = Corpus(documents=(Document("d.md", TEXT),), source="mem")
    chunks = chunk_corpus(corpus, cfg, tools)
    assert all(TEXT[c.start : c.end] == c.text and len(c.text) <= 120 for c in chunks)
    assert "Refunds are issued" in chunks[0].text and "cathedral" not in chunks[0].text
    assert len(chunks) >= 3
    assert chunks_key(corpus, cfg, tools) != chunks_key(corpus, cfg, NO_TOOLS)
    again = with_sentence_embedder(
        ChunkTools(embedder=tools.embedder), cfg, FALLBACK_EMBEDDING, cache
    )
    assert chunk_corpus(corpus, cfg, again) == chunks  # from the embedding store
