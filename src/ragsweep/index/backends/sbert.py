"""The ``sentence_transformers`` backend: any bi-encoder sentence-transformers loads, from a
folder, a ``pkg:`` folder or the local hub cache (:mod:`ragsweep.index.st_models`),
with query and document prompts (e5's ``query: ``, nomic's ``search_query: ``), exact cosine
search over L2-normalized vectors.

Needs the extra: ``pip install 'ragsweep[st]'`` (sentence-transformers and a CPU torch).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragsweep.config.schema import EmbeddingConfig, not_hashed, result_fields
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.index import st_models
from ragsweep.index.backends.dense import DenseBackend
from ragsweep.index.base import BACKENDS
from ragsweep.index.encoding import DenseEncoder, ModelIdentity, l2_normalize, options_for

KEY = "embedding.model"
PROMPT_FIELDS = ("query_prompt", "document_prompt", "query_prompt_name", "document_prompt_name")
CALL_BATCHES = 8
"""Batches handed to ``SentenceTransformer.encode`` per call: it sorts each call's texts by
length before batching, so larger calls pad less (progress advances once per call)."""


@dataclass(frozen=True)
class SentenceTransformersOptions:
    """Options of a sentence-transformers bi-encoder.

    ``query_prompt`` / ``document_prompt``: text put before every query / chunk (e5:
    ``"query: "`` and ``"passage: "``); ``query_prompt_name`` / ``document_prompt_name``: a
    prompt the model's own config names (``config_sentence_transformers.json``) instead.
    ``max_seq_length``: tokens kept per text (null: the model's own limit). These change
    vectors. ``batch_size`` (texts per forward pass), ``device`` (``cpu``, ``cuda``, ...)
    and ``threads`` (torch CPU threads) do not.
    """

    query_prompt: str = ""
    document_prompt: str = ""
    query_prompt_name: str | None = None
    document_prompt_name: str | None = None
    max_seq_length: int | None = None
    batch_size: int = not_hashed(32)
    device: str = not_hashed("cpu")
    threads: int = not_hashed(default_factory=lambda: max(1, os.cpu_count() or 1))

    def __post_init__(self) -> None:
        for role in ("query", "document"):
            if getattr(self, f"{role}_prompt") and getattr(self, f"{role}_prompt_name"):
                raise ConfigError(
                    f"embedding.options: give {role}_prompt or {role}_prompt_name, not both"
                )
        for key in ("batch_size", "threads"):
            if getattr(self, key) < 1:
                raise ConfigError(f"embedding.options.{key}={getattr(self, key)} must be >= 1")
        if self.max_seq_length is not None and self.max_seq_length < 1:
            raise ConfigError(
                f"embedding.options.max_seq_length={self.max_seq_length} must be >= 1"
            )


def prompts(folder: Path, options: SentenceTransformersOptions) -> dict[str, str]:
    """The literal query and document prompts: given ones, or named ones looked up in the
    model's ``config_sentence_transformers.json``."""
    named = (st_models.read_json(folder / "config_sentence_transformers.json") or {}).get(
        "prompts"
    ) or {}
    out = {}
    for role in ("query", "document"):
        name = getattr(options, f"{role}_prompt_name")
        if name is None:
            out[role] = getattr(options, f"{role}_prompt")
        elif name in named:
            out[role] = named[name]
        else:
            known = ", ".join(sorted(named)) or "none"
            raise ConfigError(
                f"embedding.options.{role}_prompt_name={name!r} is not a prompt of the model "
                f"in {folder} (it has: {known})"
            )
    return out


def _pooling_dimension(config: dict[str, Any], previous: int | None) -> int | None:
    width = config.get("embedding_dimension", config.get("word_embedding_dimension", previous))
    modes = config.get("pooling_mode")
    if isinstance(modes, str):
        count = 1
    elif isinstance(modes, list):
        count = len(modes)
    else:
        count = sum(bool(v) for k, v in config.items() if k.startswith("pooling_mode_"))
    return None if width is None or count < 1 else int(width) * count


DIMENSION_READERS: dict[str, Callable[[dict[str, Any], int | None], int | None]] = {
    "Transformer": lambda config, previous: config.get("hidden_size", config.get("d_model")),
    "Pooling": _pooling_dimension,
    "Dense": lambda config, previous: config.get("out_features"),
    "Normalize": lambda config, previous: previous,
}
"""Per sentence-transformers module type: its output width from its ``config.json`` (the
Transformer's is the model's own) and the width of the module before it."""


def file_dimension(folder: Path) -> int | None:
    """The vector length the model in ``folder`` produces, read from its module configs
    (``modules.json``), or None when a module is of a kind not in
    :data:`DIMENSION_READERS`."""
    modules = st_models.read_json(folder / "modules.json")
    if not isinstance(modules, list):
        return None
    dimension: int | None = None
    for module in modules:
        reader = DIMENSION_READERS.get(str(module.get("type", "")).rsplit(".", 1)[-1])
        if reader is None:
            return None
        config = st_models.read_json(folder / module.get("path", "") / "config.json") or {}
        dimension = reader(config, dimension)
    return dimension


@functools.lru_cache(maxsize=16)
def _probed_dimension(folder: Path, digest: str) -> int:
    """The dimension of a model whose configs do not tell it: load it and ask."""
    del digest  # part of the memo key only: a changed folder is probed again
    model = st_models.load_offline("SentenceTransformer", folder, "cpu", 1)
    return int(model.get_embedding_dimension())


def st_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    """Name, files digest, prompts, sequence limit and library versions; the model is not
    loaded (unless its configs do not give its dimension)."""
    version = st_models.require_sentence_transformers(KEY)
    options = options_for(SentenceTransformersOptions, cfg)
    folder = st_models.resolve_folder(cfg.model, KEY)
    digest = st_models.folder_digest(folder)
    dimension = file_dimension(folder) or _probed_dimension(folder, digest)
    return ModelIdentity(
        backend="sentence_transformers",
        name=st_models.display_name(cfg.model, folder),
        version=version,
        dimension=dimension,
        normalized=True,
        digest=digest,
        options={
            **{k: v for k, v in result_fields(options).items() if k not in PROMPT_FIELDS},
            "prompts": prompts(folder, options),  # literal, however they were given
            "runtime": st_models.runtime_versions(),
        },
    )


class SentenceTransformerEncoder:
    """A loaded ``SentenceTransformer``; ``encode`` embeds documents (document prompt),
    :meth:`for_queries` gives the same model with the query prompt."""

    def __init__(self, cfg: EmbeddingConfig) -> None:
        configured = st_identity(cfg)
        options = options_for(SentenceTransformersOptions, cfg)
        folder = st_models.resolve_folder(cfg.model, KEY)
        self._model = st_models.load_offline(
            "SentenceTransformer", folder, options.device, options.threads
        )
        if options.max_seq_length is not None:
            self._model.max_seq_length = options.max_seq_length
        self._batch = options.batch_size
        self.batch_size = options.batch_size * CALL_BATCHES
        self.prompts = configured.options["prompts"]
        self.prompt = self.prompts["document"]
        # the loaded model's own width: a wrong reading of its configs is a DriftError
        self.identity = dataclasses.replace(
            configured, dimension=int(self._model.get_embedding_dimension())
        )

    def for_queries(self) -> SentenceTransformerEncoder:
        """This model, embedding with the query prompt."""
        view = object.__new__(SentenceTransformerEncoder)
        view.__dict__.update(self.__dict__, prompt=self.prompts["query"])
        return view

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.identity.dimension), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            prompt=self.prompt or None,
            batch_size=self._batch,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        if vectors.shape != (len(texts), self.identity.dimension):
            raise BackendError(
                f"sentence_transformers returned shape {vectors.shape}, expected "
                f"({len(texts)}, {self.identity.dimension})"
            )
        return l2_normalize(vectors)


def _query_view(encoder: DenseEncoder) -> DenseEncoder:
    assert isinstance(encoder, SentenceTransformerEncoder)
    return encoder.for_queries()


BACKENDS.add(
    "sentence_transformers",
    DenseBackend(st_identity, SentenceTransformerEncoder, query_view=_query_view),
)
