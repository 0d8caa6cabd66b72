"""Chunk sizes in tokens (``chunking.unit=tokens``): the tokenizer chunks are measured with.

A :class:`ChunkTokenizer` names a Hugging Face ``tokenizer.json`` file (read with the
``tokenizers`` library, Apache-2.0; nothing is downloaded) and carries its sha256, which is
part of the chunks' cache key and of the config hash. Which file is used is decided before
any work (:func:`ragsweep.index.chunk_tokens.chunk_tokenizer`). Tokens are counted without
special tokens (``[CLS]``, ``[SEP]``), with truncation and padding off.

:func:`token_windows` is ``chunking.mode=fixed`` in tokens; the library modes hand the
tokenizer to chonkie (:func:`ragsweep.chunk.chunkers.library_spans`).
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from ragsweep.data.spans import Span


@dataclass(frozen=True)
class ChunkTokenizer:
    """The tokenizer chunk sizes are counted in: ``path`` of its ``tokenizer.json``, its
    ``sha256``, and ``label``, how a run's summary names it (whose tokenizer, and why)."""

    path: str
    sha256: str
    label: str

    def load(self) -> Any:
        """The ``tokenizers.Tokenizer`` (loaded once per process)."""
        return load_tokenizer(self.path, self.sha256)


TOKENIZER_LIBRARY = "tokenizers"
"""The library that counts tokens (its version is part of the chunks' cache key)."""


def tokenizer_library_version() -> str:
    """The installed version of :data:`TOKENIZER_LIBRARY` (a new version may split text
    into other tokens)."""
    return version(TOKENIZER_LIBRARY)


@functools.lru_cache(maxsize=4)
def load_tokenizer(path: str, sha256: str) -> Any:
    """The tokenizer in ``path`` (whose content has digest ``sha256``: a changed file is
    read again) with truncation and padding off (a model's file often truncates at its
    maximum sequence length, which would cap every count)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(path)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _tokens(text: str, tokenizer: ChunkTokenizer) -> tuple[list[int], list[int]]:
    """The start offset of each (non-empty) token of ``text``, and the indices of the
    tokens that begin a word (a cut there re-tokenizes into the same tokens)."""
    encoding = tokenizer.load().encode(text, add_special_tokens=False)
    kept = [(s, w) for (s, e), w in zip(encoding.offsets, encoding.word_ids, strict=True) if e > s]
    starts = [s for s, _ in kept]
    words = [i for i, (_, w) in enumerate(kept) if i == 0 or w is None or w != kept[i - 1][1]]
    return starts, words


def _last_word_start(words: list[int], low: int, high: int) -> int | None:
    """The largest word-start token index in ``(low, high]``, or None."""
    index = bisect.bisect_right(words, high) - 1
    return words[index] if index >= 0 and words[index] > low else None


def token_windows(text: str, tokenizer: ChunkTokenizer, size: int, overlap: int) -> list[Span]:
    """Windows of at most ``size`` tokens, cut where a word begins (inside a word only when
    one word is longer than ``size``), each next window starting at the last word start
    within ``overlap`` tokens of the previous end. A window runs from its first token's
    start to the next token's start (the end of the text for the last), so characters the
    tokenizer skips still lie in a chunk."""
    starts, words = _tokens(text, tokenizer)
    if not starts:
        return [(0, len(text))] if text.strip() else []
    spans: list[Span] = []
    first = 0
    while first + size < len(starts):
        end = _last_word_start(words, first, first + size) or first + size
        spans.append((0 if first == 0 else starts[first], starts[end]))
        first = _last_word_start(words, first, end - overlap) or end
    spans.append((0 if first == 0 else starts[first], len(text)))
    return spans
