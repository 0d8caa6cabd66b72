"""Dense encoders backed by an embedding server: options shared by every remote backend,
and :class:`RemoteEncoder`, which turns a server API into a ragsweep ``DenseEncoder``.

The model identity of a remote encoder is read from the server when the encoder is built
(an HTTP round trip), and the vector dimension is the one the server actually returns for a
probe text. Vectors are L2-normalized here, whatever the server does, so a dot product is
the cosine. A failed request raises before any vector is returned: callers never see a
partial result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ragsweep.config.schema import EmbeddingConfig, check_all, not_hashed, result_fields
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.index.encoding import ModelIdentity, l2_normalize
from ragsweep.index.remote.http import RetryPolicy

PROBE_TEXT = "ragsweep dimension probe"
"""Embedded once when an encoder is built, to learn the dimension the server returns."""


@dataclass(frozen=True)
class ServerOptions:
    """``embedding.options`` common to remote backends. None of them changes a vector.

    ``base_url``: the server; ``batch_size``: texts per request; ``timeout`` and
    ``connect_timeout``: seconds; ``retries``: extra attempts on connection errors and 5xx;
    ``backoff``: seconds before the first retry (doubled each time).
    """

    base_url: str = not_hashed("")
    batch_size: int = not_hashed(32)
    timeout: float = not_hashed(120.0)
    connect_timeout: float = not_hashed(5.0)
    retries: int = not_hashed(3)
    backoff: float = not_hashed(0.5)

    def __post_init__(self) -> None:
        checks = (
            (self.base_url.startswith(("http://", "https://")), "base_url", "an http(s) URL"),
            (self.batch_size >= 1, "batch_size", ">= 1"),
            *RetryPolicy.checks(self),
        )
        check_all("embedding.options", self, checks)

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy.of(self)


def required_model(cfg: EmbeddingConfig, example: str) -> str:
    """``embedding.model``, which remote backends cannot do without."""
    if not cfg.model.strip():
        raise ConfigError(
            f"embedding.model is required for embedding={cfg.backend} (e.g. embedding.model="
            f"{example})"
        )
    return cfg.model.strip()


@dataclass(frozen=True)
class ServedModel:
    """What the server says about a model: its canonical ``name``, a ``version`` string and,
    where the server gives one, a ``digest`` of the weights."""

    name: str
    version: str
    digest: str | None


class EmbeddingApi(Protocol):
    """One embedding server protocol (Ollama, OpenAI-compatible)."""

    backend: str
    where: str
    """The endpoint and model, for error messages: ``http://host/api/embed (model 'x')``."""

    def describe(self) -> ServedModel: ...

    def embed(self, texts: Sequence[str]) -> list[Any]: ...


class RemoteEncoder:
    """A ``DenseEncoder`` over an :class:`EmbeddingApi`: one request per ``batch_size``
    texts, every answer checked for count, dimension and finiteness."""

    def __init__(self, api: EmbeddingApi, options: ServerOptions) -> None:
        self._api = api
        self.batch_size = options.batch_size
        served = api.describe()
        dimension = self._checked(api.embed([PROBE_TEXT]), 1, None).shape[1]
        self.identity = ModelIdentity(
            backend=api.backend,
            name=served.name,
            version=served.version,
            dimension=dimension,
            normalized=True,
            digest=served.digest,
            options=result_fields(options),
        )

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalized float32 rows, one per text (one request per ``batch_size`` texts)."""
        parts = [np.zeros((0, self.identity.dimension), dtype=np.float32)]
        for begin in range(0, len(texts), self.batch_size):
            batch = list(texts[begin : begin + self.batch_size])
            parts.append(self._checked(self._api.embed(batch), len(batch), self.identity.dimension))
        return l2_normalize(np.concatenate(parts, axis=0))

    def _checked(self, rows: list[Any], expected: int, dimension: int | None) -> np.ndarray:
        where = self._api.where
        if len(rows) != expected:
            raise BackendError(f"{where} returned {len(rows)} embeddings for {expected} texts")
        width = dimension if dimension is not None else _row_length(rows[0], where)
        if width == 0:
            raise BackendError(f"{where} returned an empty embedding")
        for index, row in enumerate(rows):
            if _row_length(row, where) != width:
                raise BackendError(
                    f"{where} returned an embedding of dimension {len(row)} at position {index}, "
                    f"expected {width}"
                )
            if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in row):
                raise BackendError(f"{where} returned a non-numeric or non-finite embedding")
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), width)


def _row_length(row: Any, where: str) -> int:
    if not isinstance(row, list):
        raise BackendError(f"{where} returned an embedding that is not a list of numbers")
    return len(row)
