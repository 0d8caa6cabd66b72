"""chunking.unit=tokens: sizes counted in a real tokenizer (all-MiniLM-L6-v2's
tokenizer.json, from the st extra's model package), offsets exact, the tokenizer's content
in the chunks key and the config hash, and a named error before any work when it cannot be
used."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsweep.chunk.chunkers import ChunkTools, chunk_corpus
from ragsweep.config.app import compose, plain_config
from ragsweep.config.schema import ChunkingConfig, EmbeddingConfig
from ragsweep.core.errors import ConfigError
from ragsweep.data.corpus import Corpus, Document
from ragsweep.index.chunk_tokens import chunk_tokenizer
from ragsweep.index.stages import chunks_key
from ragsweep.run.config import resolve
from tests.st_support import minilm_folder, needs_st

BM25 = EmbeddingConfig("bm25")
TEXT = (
    "# Refunds\n\nRefunds are issued within fourteen days of the request, to the original "
    "payment method. Unbelievably, hyperinflationary currencies are refunded in euros.\n\n"
    "## Exports\n\nYou can export all notes as a ZIP archive from Settings > Data. " * 3
)


@needs_st
@pytest.mark.parametrize("mode", ["fixed", "recursive", "sentence"])
def test_chunks_fit_in_size_tokens_and_keep_exact_offsets(mode: str) -> None:
    cfg = ChunkingConfig(mode, 24, 4 if mode != "recursive" else 0, unit="tokens")
    tokenizer = chunk_tokenizer(cfg, BM25)
    assert tokenizer is not None and "fallback" in tokenizer.label
    corpus = Corpus(documents=(Document("d.md", TEXT),), source="mem")
    chunks = chunk_corpus(corpus, cfg, ChunkTools(tokenizer))
    counts = [len(tokenizer.load().encode(c.text, add_special_tokens=False)) for c in chunks]
    assert max(counts) <= 24 < len(chunks[0].text)  # tokens, not characters
    covered = set()
    for chunk in chunks:
        assert TEXT[chunk.start : chunk.end] == chunk.text
        covered.update(range(chunk.start, chunk.end))
    assert all(i in covered for i, ch in enumerate(TEXT) if not ch.isspace())
    key = chunks_key(corpus, cfg, ChunkTools(tokenizer))
    assert key != chunks_key(corpus, cfg) != chunks_key(corpus, ChunkingConfig(mode, 24, 0))


@needs_st
def test_hash_names_the_tokenizer_and_errors_come_before_work(tmp_path: Path) -> None:
    def resolved(*overrides: str):
        return resolve(plain_config(compose(["tracking=off", *overrides])))

    chars = resolved()
    old_keys = {**chars.cfg.source}
    old_keys["chunking"] = {
        k: v
        for k, v in old_keys["chunking"].items()
        if k not in ("unit", "tokenizer", "title_prefix")
    }
    assert resolve(old_keys).config_hash == chars.config_hash
    tokens = resolved("chunking.unit=tokens")
    copied = tmp_path / "tokenizer.json"
    copied.write_bytes((minilm_folder() / "tokenizer.json").read_bytes())
    same_file = resolved("chunking.unit=tokens", f"chunking.tokenizer={copied}")
    assert tokens.chunk_tools.tokenizer.sha256 == same_file.chunk_tools.tokenizer.sha256
    moved = tmp_path / "moved" / "tokenizer.json"
    moved.parent.mkdir()
    moved.write_bytes(copied.read_bytes())
    moved_file = resolved("chunking.unit=tokens", f"chunking.tokenizer={moved}")
    # the file's content is the identity, not its path: the same file anywhere hashes alike
    assert tokens.config_hash == same_file.config_hash == moved_file.config_hash
    assert chars.config_hash != tokens.config_hash
    corpus = Corpus(documents=(Document("d.md", TEXT),), source="mem")
    keys = {chunks_key(corpus, r.cfg.chunking, r.chunk_tools) for r in (same_file, moved_file)}
    assert len(keys) == 1
    with pytest.raises(ConfigError, match=r"chunking\.mode=heading measures characters"):
        resolved("chunking=heading", "chunking.unit=tokens")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"has no tokenizer\.json"):
        resolved("chunking.unit=tokens", f"chunking.tokenizer={tmp_path / 'empty'}")
    copied.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not a tokenizer file"):
        resolved("chunking.unit=tokens", f"chunking.tokenizer={copied}")
    with pytest.raises(ConfigError, match=r"chunking\.unit='words' must be one of: chars, tokens"):
        resolved("chunking.unit=words")


@needs_st
def test_recursive_in_tokens_never_cuts_a_word_by_decoding_it() -> None:
    """chonkie's last recursive level decodes tokens, which an uncased tokenizer lowercases:
    in tokens that level is not used (it gave "hyperinfl" for "Hyperinfl" and shifted every
    later offset), so a word longer than size is not cut, and offsets stay exact."""
    cfg = ChunkingConfig("recursive", 3, 0, unit="tokens")
    tokenizer = chunk_tokenizer(cfg, BM25)
    text = "Hyperinflationary Currencies. Unbelievably."
    corpus = Corpus(documents=(Document("d.md", text),), source="mem")
    chunks = chunk_corpus(corpus, cfg, ChunkTools(tokenizer))
    assert chunks and all(text[c.start : c.end] == c.text for c in chunks)
    assert "Hyperinflationary" in chunks[0].text


@needs_st
def test_the_chunks_key_names_the_tokenizers_version(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = ChunkingConfig("fixed", 24, 4, unit="tokens")
    tools = ChunkTools(chunk_tokenizer(cfg, BM25))
    corpus = Corpus(documents=(Document("d.md", TEXT),), source="mem")
    chars = ChunkingConfig("fixed", 24, 4)
    keys = chunks_key(corpus, cfg, tools), chunks_key(corpus, chars)
    monkeypatch.setattr("ragsweep.index.stages.tokenizer_library_version", lambda: "0.0-other")
    assert chunks_key(corpus, cfg, tools) != keys[0]  # another library may count other tokens
    assert chunks_key(corpus, chars) == keys[1]  # sizes in characters: no tokenizer involved


def test_options_the_mode_or_unit_ignores_are_refused(tmp_path: Path) -> None:
    def resolved(*overrides: str):
        return resolve(plain_config(compose(["tracking=off", *overrides])))

    with pytest.raises(ConfigError, match=r"breakpoint_percentile=90.0 is used only by .*semantic"):
        resolved("chunking=semantic", "chunking.mode=fixed", "chunking.breakpoint_percentile=90")
    with pytest.raises(ConfigError, match=r"chunking\.tokenizer=.* used only with chunking\.unit"):
        resolved(f"chunking.tokenizer={tmp_path / 'tokenizer.json'}")
    assert resolved("chunking=semantic", "chunking.breakpoint_percentile=90").config_hash


def test_a_tokenizer_file_by_any_name_is_read_as_one(tmp_path: Path) -> None:
    def resolved(*overrides: str):
        return resolve(plain_config(compose(["tracking=off", "chunking.unit=tokens", *overrides])))

    other_name = tmp_path / "tokenizer.txt"
    other_name.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"{other_name} is not a tokenizer file"):
        resolved(f"chunking.tokenizer={other_name}")
