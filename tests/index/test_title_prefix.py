"""chunking.title_prefix (contextual headers): the document title and heading path head a
chunk's indexed text only; spans, hashes of configs that leave it off, and keys stay."""

from __future__ import annotations

from ragsweep.cache.stage import StageCache
from ragsweep.chunk.chunkers import chunk_corpus
from ragsweep.config.schema import ChunkingConfig, PreprocessConfig, result_fields
from ragsweep.data.corpus import Corpus, Document
from ragsweep.data.preprocess import build_preprocessor
from ragsweep.index.stages import cached_texts, document_titles, texts_key


def test_title_and_heading_path_head_the_indexed_text_only() -> None:
    doc = Document("guide.html", "# Billing\n\nRefunds take 5 days.", title="Help centre")
    corpus = Corpus(documents=(doc, Document("plain.md", "No title here.")), source="mem")
    cfg = ChunkingConfig(mode="heading", size=200, overlap=0, heading_prefix=True)
    titled = ChunkingConfig("heading", 200, 0, heading_prefix=True, title_prefix=True)
    chunks = chunk_corpus(corpus, titled)
    assert chunks == chunk_corpus(corpus, cfg)  # spans unchanged
    preprocessor = build_preprocessor(PreprocessConfig())
    texts = cached_texts(
        chunks, "k", True, preprocessor, StageCache(None), document_titles(corpus, titled)
    )
    assert texts[0] == "Help centre\nBilling\n\n# Billing\n\nRefunds take 5 days."
    assert texts[1] == "No title here."
    assert document_titles(corpus, cfg) is None
    assert "title_prefix" not in result_fields(cfg)
    assert texts_key("c", cfg, preprocessor) != texts_key("c", titled, preprocessor)
