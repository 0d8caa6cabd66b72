"""A deterministic synthetic corpus and golden set for the cost curve (bench/bench_scale.py).

Documents are made of pseudo-words (syllables, Zipf-distributed frequencies), each about
``chunks_per_doc * chunk_size`` characters, so fixed chunking at ``chunk_size`` cuts each
into ``chunks_per_doc`` chunks. Document ``i`` depends only on ``(seed, i)``: the corpus of a
smaller size is a prefix of every larger one. The golden set is the same at every size: its
cases point into the first documents (those of the smallest size), each with one evidence
span inside one chunk and a question made of words of that span, so per-case figures
compare across sizes while the distractors grow with the corpus.

Nothing here is written into the repository: the files go to the directory given.
"""

from __future__ import annotations

import functools
import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragsweep.index.encoding import ModelIdentity, l2_normalize

ONSETS = (
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "br",
    "cl",
    "dr",
    "gr",
    "pl",
    "st",
    "tr",
    "sh",
    "ch",
    "th",
)
VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou", "io")
CODAS = ("", "", "", "n", "r", "s", "l", "t", "m", "nd", "st", "rk")


@dataclass(frozen=True)
class CorpusSpec:
    """Shape of the synthetic corpus: ``n_docs`` documents of about ``chunk_size *
    chunks_per_doc`` characters; ``n_cases`` golden cases over the first ``golden_docs``
    documents (10% of them unanswerable)."""

    n_docs: int
    chunk_size: int = 200
    chunks_per_doc: int = 8
    n_cases: int = 500
    golden_docs: int = 1250
    vocabulary: int = 30_000
    seed: int = 17

    @property
    def doc_chars(self) -> int:
        return self.chunk_size * self.chunks_per_doc


@functools.cache
def vocabulary(size: int, seed: int) -> np.ndarray:
    """``size`` distinct pseudo-words of one to four syllables, as an object array."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        n = int(rng.integers(1, 5))
        word = "".join(
            ONSETS[rng.integers(len(ONSETS))]
            + VOWELS[rng.integers(len(VOWELS))]
            + CODAS[rng.integers(len(CODAS))]
            for _ in range(n)
        )
        words.setdefault(word, None)
    return np.array(list(words), dtype=object)


def zipf_probabilities(size: int, exponent: float = 1.05) -> np.ndarray:
    weights = 1.0 / np.arange(1, size + 1) ** exponent
    return weights / weights.sum()


_CUMULATIVE: dict[int, np.ndarray] = {}


def _cumulative(p: np.ndarray) -> np.ndarray:
    """The CDF of ``p``, computed once per probability array."""
    key = id(p)
    if key not in _CUMULATIVE:
        _CUMULATIVE.clear()
        _CUMULATIVE[key] = np.cumsum(p)
    return _CUMULATIVE[key]


def document_text(spec: CorpusSpec, index: int, words: np.ndarray, p: np.ndarray) -> str:
    """Document ``index``: sentences of 6-15 words, cut at the last word within
    ``spec.doc_chars`` characters."""
    rng = np.random.default_rng([spec.seed, index])
    # inverse CDF: rng.choice(..., p=p) would rebuild the CDF of the vocabulary per call
    cumulative = _cumulative(p)
    drawn = np.searchsorted(cumulative, rng.random(spec.doc_chars // 4), side="right")
    picked = words[np.minimum(drawn, len(words) - 1)]
    sentence_ends = set(np.cumsum(rng.integers(6, 16, size=len(picked))).tolist())
    parts: list[str] = []
    length = 0
    for i, word in enumerate(picked):
        token = word + ("." if i + 1 in sentence_ends else "")
        if length + len(token) + 1 > spec.doc_chars:
            break
        parts.append(token)
        length += len(token) + 1
    return " ".join(parts)


def write_corpus(spec: CorpusSpec, path: Path) -> None:
    """The corpus as JSONL (``{"id", "text"}`` per line)."""
    words = vocabulary(spec.vocabulary, spec.seed)
    p = zipf_probabilities(len(words))
    with path.open("w", encoding="utf-8") as out:
        for i in range(spec.n_docs):
            text = document_text(spec, i, words, p)
            out.write(json.dumps({"id": f"doc-{i:07d}", "text": text}) + "\n")


WORD = re.compile(r"\w+")


def write_golden(spec: CorpusSpec, path: Path) -> None:
    """``spec.n_cases`` cases over the first ``spec.golden_docs`` documents: each an
    evidence span of 60-120 characters inside one chunk window, and a question of five of
    its words plus two frequent words (``lookup``) or three of its words (``vague``); every
    tenth case asks about words of no document (unanswerable); one in five answerable
    cases has a ``scope`` of its document and the next two."""
    words = vocabulary(spec.vocabulary, spec.seed)
    p = zipf_probabilities(len(words))
    rng = np.random.default_rng([spec.seed, 2**32 - 1])
    with path.open("w", encoding="utf-8") as out:
        for case in range(spec.n_cases):
            row = golden_case(spec, case, rng, words, p)
            out.write(json.dumps(row) + "\n")


def golden_case(
    spec: CorpusSpec, case: int, rng: np.random.Generator, words: np.ndarray, p: np.ndarray
) -> dict[str, object]:
    case_id = f"c-{case:04d}"
    if case % 10 == 9:
        unknown = [f"zq{int(rng.integers(10**6))}x" for _ in range(4)]
        return {
            "id": case_id,
            "question": " ".join(unknown) + "?",
            "type": "lookup",
            "answerable": False,
            "split": "tuning",
            "evidence": [],
        }
    doc = int(rng.integers(min(spec.golden_docs, spec.n_docs)))
    text = document_text(spec, doc, words, p)
    window = int(rng.integers(spec.chunks_per_doc - 1)) * spec.chunk_size
    inside = [m for m in WORD.finditer(text) if window + 5 <= m.start() < window + 60]
    first = inside[int(rng.integers(len(inside)))] if inside else next(WORD.finditer(text))
    start = first.start()
    end = start + int(rng.integers(60, 121))
    end = min(end, window + spec.chunk_size - 5, len(text))
    end = text.rfind(" ", start, end) if " " in text[start:end] else end
    span_words = WORD.findall(text[start:end])
    kind = "lookup" if case % 2 == 0 else "vague"
    n = 5 if kind == "lookup" else 3
    chosen = [
        span_words[i]
        for i in sorted(rng.choice(len(span_words), min(n, len(span_words)), replace=False))
    ]
    if kind == "lookup":
        chosen += [str(words[int(i)]) for i in rng.choice(20, 2, p=p[:20] / p[:20].sum())]
    row: dict[str, object] = {
        "id": case_id,
        "question": " ".join(chosen) + "?",
        "type": kind,
        "answerable": True,
        "split": "tuning",
        "evidence": [{"doc": f"doc-{doc:07d}", "start": start, "end": end}],
    }
    if case % 5 == 2:  # a fifth of the cases search only their document and two others
        near = [(doc + step) % min(spec.golden_docs, spec.n_docs) for step in (0, 1, 2)]
        row["scope"] = [f"doc-{d:07d}" for d in near]
    return row


# --- the cheap deterministic encoder --------------------------------------------------


@dataclass(frozen=True)
class HashedOptions:
    """Vector length of the hashed bag of words."""

    dimension: int = 256


class HashedBagOfWords:
    """Each lower-cased word adds ±1 at ``crc32(word) % dimension`` (sign from another
    bit), rows L2-normalized: deterministic, model-free vectors, so the cost curve
    measures ragsweep's embedding store, index and search rather than a model."""

    batch_size = 1024

    def __init__(self, dimension: int) -> None:
        self.identity = hashed_identity(dimension)
        self.dimension = dimension
        self._buckets: dict[str, tuple[int, float]] = {}

    def _bucket(self, word: str) -> tuple[int, float]:
        found = self._buckets.get(word)
        if found is None:
            h = zlib.crc32(word.encode("utf-8"))
            found = self._buckets[word] = (h % self.dimension, 1.0 if h & 1 << 31 else -1.0)
        return found

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                bucket, sign = self._bucket(word)
                out[row, bucket] += sign
        return l2_normalize(out)


def hashed_identity(dimension: int) -> ModelIdentity:
    return ModelIdentity(
        backend="hashed_bow",
        name="crc32-bag-of-words",
        version="1",
        dimension=dimension,
        normalized=True,
        options={"dimension": dimension},
    )


def register_hashed_backend() -> None:
    """Register ``embedding.backend=hashed_bow``: ragsweep's own dense backend (embedding
    store, memory-mapped vectors, blocked exact search) over :class:`HashedBagOfWords`."""
    from ragsweep.config.schema import EmbeddingConfig
    from ragsweep.index.backends import BACKENDS
    from ragsweep.index.backends.dense import DenseBackend
    from ragsweep.index.encoding import options_for

    def identity(cfg: EmbeddingConfig) -> ModelIdentity:
        return hashed_identity(options_for(HashedOptions, cfg).dimension)

    def encoder(cfg: EmbeddingConfig) -> HashedBagOfWords:
        return HashedBagOfWords(options_for(HashedOptions, cfg).dimension)

    BACKENDS.add("hashed_bow", DenseBackend(identity, encoder))
