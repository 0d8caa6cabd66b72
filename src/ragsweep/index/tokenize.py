"""Lexical tokenizer for BM25 that handles Latin and CJK text.

Latin/Cyrillic/... text is split into word tokens; runs of CJK characters (Han, Hiragana,
Katakana, Hangul), which have no spaces between words, become overlapping character
n-grams (bigrams by default), the usual approach for CJK lexical retrieval.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CJK = (
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff66-\uff9f"  # half-width katakana
)
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+", re.UNICODE)
_CJK_RUN = re.compile(rf"[{_CJK}]+")


@dataclass(frozen=True)
class TokenizerConfig:
    """``cjk_ngram``: n-gram length for CJK runs (runs shorter than n stay one token)."""

    lowercase: bool = True
    cjk_ngram: int = 2

    def __post_init__(self) -> None:
        if self.cjk_ngram < 1:
            raise ValueError(f"cjk_ngram={self.cjk_ngram} must be >= 1")


def tokenize(text: str, cfg: TokenizerConfig) -> list[str]:
    """Split ``text`` into BM25 tokens."""
    if cfg.lowercase:
        text = text.lower()
    if not _CJK_RUN.search(text):
        # No CJK run: every match is a word token. One findall is ~3x faster than the loop
        # below, and BM25 indexing tokenizes every chunk of the corpus.
        return _TOKEN.findall(text)
    tokens: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if _CJK_RUN.fullmatch(token):
            tokens.extend(_ngrams(token, cfg.cjk_ngram))
        else:
            tokens.append(token)
    return tokens


def _ngrams(run: str, n: int) -> list[str]:
    if len(run) <= n:
        return [run]
    return [run[i : i + n] for i in range(len(run) - n + 1)]
