"""What every index is: its provenance, the query and result types, and top-k selection.

Each backend (:mod:`ragsweep.index.backends`) implements :class:`Index` over its own storage.
Every index carries an :class:`IndexProvenance`; the query side is checked against it
before any search (:meth:`IndexProvenance.check_query_side`), and a stored index whose
provenance differs from the expected one is not used (:meth:`IndexProvenance.check_stored`);
a mismatch is a :class:`DriftError`.

Every retrieval backend is registered by name (``embedding.backend``) in :data:`BACKENDS`
and implements :class:`Backend`: a model identity, options, and its own cached index, so
the pipeline never branches on a backend's kind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ragsweep import __version__
from ragsweep.cache.entries import write_json
from ragsweep.core.errors import DriftError
from ragsweep.core.registry import Registry

if TYPE_CHECKING:
    from ragsweep.cache.stage import StageCache
    from ragsweep.config.schema import EmbeddingConfig
    from ragsweep.index.encoding import ModelIdentity


@dataclass(frozen=True)
class IndexProvenance:
    """What an index was built from. Compared field by field against the query side."""

    model: ModelIdentity
    preprocess: dict[str, Any]
    chunking_key: str
    corpus_hash: str
    n_chunks: int
    ragsweep_version: str = __version__

    def check_query_side(self, model: ModelIdentity, preprocess: Mapping[str, Any]) -> None:
        """Raise DriftError naming both sides if queries would be encoded differently."""
        if model != self.model:
            fields = ", ".join(self.model.differences(model))
            raise DriftError(
                f"embedding drift ({fields}): index built with {self.model.describe()}, "
                f"queries encoded with {model.describe()}; rebuild the index or use the "
                "same model"
            )
        if dict(preprocess) != self.preprocess:
            raise DriftError(
                f"preprocessing drift: index built with {self.preprocess}, "
                f"queries preprocessed with {preprocess}"
            )

    def write(self, folder: Path) -> None:
        """Store this provenance beside an index (``provenance.json``)."""
        write_json(folder / "provenance.json", asdict(self))

    def check_stored(self, folder: Path) -> None:
        """Raise DriftError naming the differing fields if the index in ``folder`` was built
        from anything else than this provenance says."""
        stored = json.loads((folder / "provenance.json").read_text(encoding="utf-8"))
        wanted = json.loads(json.dumps(asdict(self)))
        if stored != wanted:
            differing = sorted(k for k in wanted if stored.get(k) != wanted.get(k))
            raise DriftError(
                f"cached index {folder} has provenance {', '.join(differing)} = "
                f"{ {k: stored.get(k) for k in differing} }, expected "
                f"{ {k: wanted.get(k) for k in differing} }"
            )


@dataclass(frozen=True)
class Query:
    """A preprocessed question, the chunk mask of its scope (None = all chunks) and the id
    of its golden case (external rankings are looked up by it)."""

    text: str
    allowed: np.ndarray | None = None
    case: str | None = None


@dataclass(frozen=True)
class Ranked:
    """Top-k result of one query: chunk indices (best first), their scores, and the search
    time of the query in seconds (scoring + selection; query embedding excluded; for a
    dense index the amortized share of a batch, see :class:`DenseIndex`).

    ``stages`` splits ``seconds`` by stage when a ranking took several, as
    ``(name, seconds)`` pairs in order (a hybrid's ``sparse``, ``dense`` and ``fusion``, a
    reranked run's ``rerank``); empty for a single search.
    """

    indices: np.ndarray
    scores: np.ndarray
    seconds: float
    stages: tuple[tuple[str, float], ...] = ()


class Index(Protocol):
    """A searchable index. ``search`` first checks the query side (``query_model`` and the
    identity of the preprocessing the queries went through) against the provenance."""

    provenance: IndexProvenance

    @property
    def query_model(self) -> ModelIdentity: ...

    def search(
        self, queries: Sequence[Query], top_k: int, query_preprocess: Mapping[str, Any]
    ) -> list[Ranked]: ...


def top_k_indices(scores: np.ndarray, k: int, min_score: float) -> np.ndarray:
    """Indices of the k highest scores above ``min_score``, best first; ties by index."""
    candidates = np.flatnonzero(scores > min_score)
    if candidates.size > k:
        part = np.argpartition(-scores[candidates], k - 1)[:k]
        threshold = scores[candidates[part]].min()
        candidates = candidates[scores[candidates] >= threshold]  # keep ties for stable order
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order][:k]


def top_k_rows(scores: np.ndarray, k: int, min_score: float) -> list[np.ndarray]:
    """:func:`top_k_indices` of every row of ``scores`` (queries x chunks), in one pass.

    Rows whose k-th best score is tied with a score outside the top k, and rows with fewer
    than k scores above ``min_score``, go through :func:`top_k_indices` one by one, so
    every row gets exactly what :func:`top_k_indices` gives it.
    """
    n_rows, n_cols = scores.shape
    if n_rows == 0 or n_cols == 0 or k < 1:
        return [np.empty(0, dtype=np.int64) for _ in range(n_rows)]
    width = min(k, n_cols)
    part = np.argpartition(scores, n_cols - width, axis=1)[:, n_cols - width :]
    values = np.take_along_axis(scores, part, axis=1)
    kth = values.min(axis=1)
    plain = ((scores >= kth[:, None]).sum(axis=1) == width) & (kth > min_score)
    order = np.lexsort((part, -values), axis=1)
    ranked = np.take_along_axis(part, order, axis=1)
    return [
        ranked[row] if plain[row] else top_k_indices(scores[row], k, min_score)
        for row in range(n_rows)
    ]


ScopeMask = Callable[[Sequence[str] | None], np.ndarray | None]


def scope_masker(chunk_docs: Sequence[str]) -> ScopeMask:
    """A function from a case's scope (doc ids) to a boolean chunk mask, memoized."""
    # Chunks compared by integer document code: np.isin over an object array of ids
    # compares Python strings, ~50x slower, and a golden set can have a scope per case.
    codes: dict[str, int] = {}
    chunk_codes = np.fromiter(
        (codes.setdefault(doc, len(codes)) for doc in chunk_docs),
        dtype=np.int64,
        count=len(chunk_docs),
    )
    return scope_masker_from_codes(chunk_codes, codes)


def scope_masker_from_codes(chunk_codes: np.ndarray, codes: Mapping[str, int]) -> ScopeMask:
    """:func:`scope_masker` of chunks given by document code: chunk i belongs to the
    document whose code (``codes[doc]``, 0 to ``len(codes) - 1``) is ``chunk_codes[i]``.

    When the codes do not decrease (chunks in corpus order, as chunking makes them), a
    document's chunks are one run of rows, found by binary search: a mask then costs its
    scope's chunks (the rest of it stays unwritten zero pages), not the whole corpus.
    """
    memo: dict[tuple[str, ...], np.ndarray] = {}
    ordered = bool(np.all(chunk_codes[1:] >= chunk_codes[:-1]))

    def mask(scope: Sequence[str] | None) -> np.ndarray | None:
        if scope is None:
            return None
        key = tuple(sorted(scope))
        if key not in memo:
            wanted = [codes[doc] for doc in key if doc in codes]
            if ordered:
                memo[key] = _runs_mask(chunk_codes, wanted)
            else:
                allowed = np.zeros(len(codes), dtype=bool)
                allowed[wanted] = True
                memo[key] = allowed[chunk_codes]
        return memo[key]

    return mask


def _runs_mask(ordered_codes: np.ndarray, wanted: Sequence[int]) -> np.ndarray:
    """The chunks whose (non-decreasing) code is in ``wanted``."""
    allowed = np.zeros(len(ordered_codes), dtype=bool)
    targets = np.asarray(wanted, dtype=np.int64)
    begins = np.searchsorted(ordered_codes, targets, side="left").tolist()
    ends = np.searchsorted(ordered_codes, targets, side="right").tolist()
    for begin, end in zip(begins, ends, strict=True):
        allowed[begin:end] = True
    return allowed


# --- backends -------------------------------------------------------------------------


class Backend(Protocol):
    """A registered backend.

    ``index_code`` is a digest of the code that shapes its stored index (part of the index
    key), ``search_code`` one of the code that turns index and queries into rankings (part
    of the rankings key).
    """

    @property
    def index_stage(self) -> str:
        """The cache stage its indexes are stored under (``bm25_index``, ``dense_index``)."""
        ...

    @property
    def index_code(self) -> str: ...

    @property
    def search_code(self) -> str: ...

    def identity(self, cfg: EmbeddingConfig) -> ModelIdentity:
        """The identity of the model ``cfg`` names, without loading it."""
        ...

    def cached_index(
        self,
        texts: Sequence[str],
        key: str,
        cfg: EmbeddingConfig,
        provenance: IndexProvenance,
        cache: StageCache,
    ) -> Index:
        """The index over ``texts`` under ``key``, built on a miss; its stored provenance
        must equal ``provenance``."""
        ...


BACKENDS: Registry[Backend] = Registry("embedding.backend")
"""A backend may also define ``own_chunks(cfg, corpus) -> list[Chunk]`` when its chunks
are not cut by ``chunking`` but come with it (``external``: another system's chunks), and
then ``complete_chunks(cfg) -> bool``: whether those are all its chunks (span traces
record the chunk that hits an evidence span only then)."""
