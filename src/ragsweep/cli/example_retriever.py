"""An example retriever of your own: TF-IDF over words, in plain Python.

``ragsweep init --example retriever`` copied this file into the project as
``retrievers/example.py``. Run it from the project folder (the folder is importable):

    ragsweep embedding=custom embedding.options._target_=retrievers.example.TfidfRetriever

Every other key under ``embedding.options`` goes to the constructor, e.g.
``+embedding.options.sublinear=false``. A class like this implements the protocol
``ragsweep.index.backends.custom.Retriever`` (ragsweep's docs/retrieval.md): a ``version``
string, ``build(texts)`` and ``search(queries, top_k, allowed)``. ragsweep caches the
rankings under the class name, the constructor arguments and ``version``: bump ``version``
whenever you change the code in a way that changes results.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

WORD = re.compile(r"\w+")


def words(text: str) -> list[str]:
    """Lower-cased words (runs of letters, digits and underscores)."""
    return WORD.findall(text.lower())


class TfidfRetriever:
    """TF-IDF cosine similarity between a question's words and each chunk's words."""

    def __init__(self, sublinear: bool = True, version: str = "1") -> None:
        self.sublinear = sublinear  # weigh a word by 1 + log(count) instead of its count
        self.version = version
        self.idf: dict[str, float] = {}
        self.chunks: list[dict[str, float]] = []

    def build(self, texts: Sequence[str]) -> None:
        """Index the chunk texts: ``texts[i]`` is chunk ``i``."""
        counts = [Counter(words(text)) for text in texts]
        documents = Counter(word for count in counts for word in count)
        self.idf = {w: math.log((1 + len(texts)) / (1 + n)) + 1 for w, n in documents.items()}
        self.chunks = [self._vector(count) for count in counts]

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        """Unit-length TF-IDF weights of the indexed words in ``counts``."""
        weights = {
            w: (1 + math.log(n) if self.sublinear else n) * self.idf[w]
            for w, n in counts.items()
            if w in self.idf
        }
        norm = math.sqrt(sum(x * x for x in weights.values()))
        return {w: x / norm for w, x in weights.items()} if norm else {}

    def search(
        self, queries: Sequence[str], top_k: int, allowed: Sequence[Any]
    ) -> list[list[tuple[int, float]]]:
        """For each query, up to ``top_k`` ``(chunk index, score)`` pairs, best first.
        ``allowed[j]`` is None or a boolean mask over the chunks: those query ``j`` may
        return (its scope)."""
        rankings = []
        for query, mask in zip(queries, allowed, strict=True):
            vector = self._vector(Counter(words(query)))
            scores = [
                (i, sum(x * chunk.get(w, 0.0) for w, x in vector.items()))
                for i, chunk in enumerate(self.chunks)
                if mask is None or mask[i]
            ]
            best = sorted((s for s in scores if s[1] > 0), key=lambda s: (-s[1], s[0]))
            rankings.append(best[:top_k])
        return rankings
