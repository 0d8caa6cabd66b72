"""chunking.mode=recursive and sentence: chonkie's chunkers, with offsets that give every
chunk's text back and every non-whitespace character covered, on the demo corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsweep.chunk.chunkers import chunk_corpus
from ragsweep.config.schema import ChunkingConfig, CorpusConfig
from ragsweep.data.corpus import load_corpus

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "demo" / "corpus"


@pytest.mark.parametrize(("mode", "overlap"), [("recursive", 0), ("sentence", 60)])
def test_library_chunks_are_exact_spans_covering_the_text(mode: str, overlap: int) -> None:
    corpus = load_corpus(CorpusConfig(path=str(DEMO_CORPUS)))
    cfg = ChunkingConfig(mode=mode, size=300, overlap=overlap)
    chunks = chunk_corpus(corpus, cfg)
    assert len(chunks) > len(corpus)
    covered: dict[str, set[int]] = {}
    for chunk in chunks:
        text = corpus.get(chunk.doc).text
        assert chunk.text == text[chunk.start : chunk.end]
        assert len(chunk.text) <= cfg.size
        covered.setdefault(chunk.doc, set()).update(range(chunk.start, chunk.end))
    for doc in corpus:
        missing = [
            i for i, c in enumerate(doc.text) if not c.isspace() and i not in covered[doc.id]
        ]
        assert not missing, (doc.id, missing[:5])


def test_library_modes_differ_from_fixed_windows() -> None:
    corpus = load_corpus(CorpusConfig(path=str(DEMO_CORPUS)))
    spans = {
        mode: [(c.doc, c.start, c.end) for c in chunk_corpus(corpus, ChunkingConfig(mode, 300, 0))]
        for mode in ("fixed", "recursive", "sentence")
    }
    assert spans["recursive"] != spans["fixed"] and spans["sentence"] != spans["recursive"]
