"""What a model's representation is: its identity, the dense-encoder protocol, and the
helpers every backend shares (options validation, L2 normalization, batched encoding).

This module imports no backend and no server client, so backends (:mod:`ragsweep.index.backends`)
and HTTP clients (:mod:`ragsweep.index.remote`) can both depend on it without a cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ragsweep.config.schema import EmbeddingConfig, from_mapping
from ragsweep.core.hashing import sha256_json


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


def options_for(cls: type[Any], cfg: EmbeddingConfig) -> Any:
    """Validate ``embedding.options`` against a backend's options dataclass."""
    return from_mapping(cls, cfg.options, "embedding.options")


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0.0, 1.0, norms)


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
