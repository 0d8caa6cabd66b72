"""A retriever of a user's own, as ``embedding=custom`` loads one: TF-IDF cosine over
word and character-bigram features, in numpy (docs/retrieval.md shows the protocol)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

WORD = re.compile(r"\w+")


def features(text: str) -> list[str]:
    words = WORD.findall(text.lower())
    return words + [w[i : i + 2] for w in words for i in range(len(w) - 1)]


class TfidfRetriever:
    """``version`` goes into the cache keys; ``sublinear`` is a constructor argument."""

    def __init__(self, sublinear: bool = True, version: str = "1") -> None:
        self.sublinear = sublinear
        self.version = version
        self.builds = 0

    def build(self, texts: Sequence[str]) -> None:
        counts = [Counter(features(t)) for t in texts]
        self.vocab = {f: i for i, f in enumerate(sorted({f for c in counts for f in c}))}
        df = np.zeros(len(self.vocab))
        for c in counts:
            df[[self.vocab[f] for f in c]] += 1
        self.idf = np.log((1 + len(texts)) / (1 + df)) + 1
        self.matrix = np.vstack([self._vector(c) for c in counts])
        self.builds += 1

    def _vector(self, counts: Counter[str]) -> np.ndarray:
        row = np.zeros(len(self.vocab))
        for f, n in counts.items():
            if f in self.vocab:
                row[self.vocab[f]] = (1 + np.log(n)) if self.sublinear else n
        row *= self.idf
        norm = np.linalg.norm(row)
        return row / norm if norm else row

    def search(
        self, queries: Sequence[str], top_k: int, allowed: Sequence[np.ndarray | None]
    ) -> list[list[tuple[int, float]]]:
        out = []
        for query, mask in zip(queries, allowed, strict=True):
            scores = self.matrix @ self._vector(Counter(features(query)))
            if mask is not None:
                scores = np.where(mask, scores, -1.0)
            order = [i for i in np.argsort(-scores, kind="stable") if scores[i] > 0][:top_k]
            out.append([(int(i), float(scores[i])) for i in order])
        return out


class NoSearch:
    """Not a retriever: it has no ``search``."""

    version = "0"

    def build(self, texts: Sequence[str]) -> None:
        del texts
