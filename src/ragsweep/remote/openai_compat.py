"""The ``openai`` embedding backend: any server with an OpenAI-compatible ``/v1/embeddings``
(llama.cpp, vLLM, TEI, Ollama's ``/v1``, hosted APIs).

Such servers give no weight digest. The identity is the model id, a hash of the model's
``/v1/models`` entry (without its volatile ``created`` time) when the server lists models,
and the dimension observed on a probe text: weaker than Ollama's digest, since new weights
served under the same id with the same metadata go unnoticed (docs/ollama.md).

An API key is read from the environment variable named by ``embedding.options.api_key_env``
and only ever sent as a request header: it is never part of the config, the identity, the
logged params or any artifact.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragsweep.config import EmbeddingConfig, not_hashed
from ragsweep.encoding import ModelIdentity, options_for
from ragsweep.errors import BackendError, ConfigError
from ragsweep.hashing import sha256_json
from ragsweep.remote.encoder import RemoteEncoder, ServedModel, ServerOptions, required_model
from ragsweep.remote.http import HttpStatusError, JsonClient

DEFAULT_BASE_URL = "http://127.0.0.1:8080/v1"
VOLATILE_MODEL_FIELDS = frozenset({"created"})
"""Fields of a ``/v1/models`` entry that change between calls (vLLM stamps the request time)."""
_AUTH_FAILURES = (401, 403)


@dataclass(frozen=True)
class OpenAICompatOptions(ServerOptions):
    """``embedding.options`` of ``embedding=openai``. ``base_url`` includes the API prefix
    (``http://host:port/v1``); ``api_key_env`` names the environment variable holding the
    API key (null: no key is sent)."""

    base_url: str = not_hashed(DEFAULT_BASE_URL)
    api_key_env: str | None = not_hashed(None)


def read_options(cfg: EmbeddingConfig) -> OpenAICompatOptions:
    if "api_key" in cfg.options:
        raise ConfigError(
            "embedding.options.api_key is not accepted: configs are logged. Put the key in an "
            "environment variable and name it in embedding.options.api_key_env"
        )
    options: OpenAICompatOptions = options_for(OpenAICompatOptions, cfg)
    return options


def auth_headers(api_key_env: str | None) -> dict[str, str]:
    """The ``Authorization`` header from ``$api_key_env`` (none when not configured)."""
    if not api_key_env:
        return {}
    key = os.environ.get(api_key_env, "")
    if not key:
        raise ConfigError(
            f"embedding.options.api_key_env={api_key_env!r}, but the environment variable "
            f"{api_key_env} is not set"
        )
    return {"Authorization": f"Bearer {key}"}


class OpenAICompatApi:
    """``/embeddings`` and ``/models`` of one model on an OpenAI-compatible server."""

    backend = "openai"

    def __init__(self, model: str, options: OpenAICompatOptions) -> None:
        self.model = model
        self.api_key_env = options.api_key_env
        self.client = JsonClient(
            options.base_url,
            options.policy,
            label=f"OpenAI-compatible embedding server (model {model!r})",
            hint="Start the server (llama.cpp, vLLM, TEI, ...) or set embedding.options.base_url "
            "to its URL, including the /v1 prefix.",
            headers=auth_headers(options.api_key_env),
        )
        self.where = f"{self.client.url('/embeddings')} (model {model!r})"

    def describe(self) -> ServedModel:
        entry = self._listed_entry()
        if entry is None:
            return ServedModel(self.model, "unlisted", None)
        stable = {k: v for k, v in entry.items() if k not in VOLATILE_MODEL_FIELDS}
        return ServedModel(self.model, f"models:{sha256_json(stable)[:16]}", None)

    def embed(self, texts: Sequence[str]) -> list[Any]:
        payload = {"model": self.model, "input": list(texts), "encoding_format": "float"}
        answer = self._call(lambda: self.client.post("/embeddings", payload))
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
            raise BackendError(f"{self.where} answered without a 'data' list")
        ordered = sorted(data, key=lambda d: d.get("index", 0))
        return [d.get("embedding") for d in ordered]

    def _listed_entry(self) -> dict[str, Any] | None:
        """This model's ``/models`` entry; None when the server has no model listing."""
        try:
            listing = self._call(lambda: self.client.get("/models"))
        except HttpStatusError as exc:
            if exc.status in (404, 405, 501):
                return None
            raise
        entries = listing.get("data") if isinstance(listing, dict) else None
        if not isinstance(entries, list):
            return None
        for entry in entries:
            if isinstance(entry, dict) and entry.get("id") == self.model:
                return entry
        served = ", ".join(str(e.get("id")) for e in entries if isinstance(e, dict))
        raise BackendError(
            f"the server at {self.client.url('/models')} does not serve model {self.model!r} "
            f"(it serves: {served or 'nothing'}); set embedding.model to one of these ids"
        )

    def _call(self, send: Callable[[], Any]) -> Any:
        try:
            return send()
        except HttpStatusError as exc:
            if exc.status not in _AUTH_FAILURES:
                raise
            source = (
                f"the key in ${self.api_key_env} (embedding.options.api_key_env)"
                if self.api_key_env
                else "no API key (set embedding.options.api_key_env to the environment "
                "variable that holds one)"
            )
            raise BackendError(
                f"{self.where} refused the request (HTTP {exc.status}: {exc.detail}); sent {source}"
            ) from None


class OpenAICompatEncoder(RemoteEncoder):
    """``embedding=openai``: vectors from ``<base_url>/embeddings``."""

    def __init__(self, cfg: EmbeddingConfig) -> None:
        options = read_options(cfg)
        model = required_model(cfg, "nomic-embed-text-v1.5")
        super().__init__(OpenAICompatApi(model, options), options)


def openai_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    """The served model's identity (asks the server, and embeds a probe text)."""
    return OpenAICompatEncoder(cfg).identity
