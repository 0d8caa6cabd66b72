"""The ``openai`` embedding backend: any server with an OpenAI-compatible ``/v1/embeddings``
(llama.cpp, vLLM, TEI, Ollama's ``/v1``, hosted APIs).

Such servers give no weight digest. The identity is the model id, a hash of the model's
``/v1/models`` entry (without its volatile ``created`` time) when the server lists models,
and the dimension observed on a probe text: weaker than Ollama's digest, since new weights
served under the same id with the same metadata go unnoticed (docs/embeddings.md).

An API key is read from the environment variable named by ``embedding.options.api_key_env``
and only ever sent as a request header: it is never part of the config, the identity, the
logged params or any artifact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ragsweep.config.schema import EmbeddingConfig, not_hashed
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.core.hashing import sha256_json
from ragsweep.index.encoding import ModelIdentity, options_for
from ragsweep.index.remote.encoder import RemoteEncoder, ServedModel, ServerOptions, required_model
from ragsweep.index.remote.http import HttpStatusError, JsonClient, auth_headers

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


class OpenAIServer:
    """Calls to one OpenAI-compatible server, shared by embeddings and chat: 401/403 answers
    become errors that name the API key's environment variable (never the key), and the
    ``/models`` listing says which model ids are served.

    ``key_env_key`` and ``model_key`` are the config keys of the key variable and of the
    model, named in errors."""

    def __init__(
        self, client: JsonClient, api_key_env: str | None, key_env_key: str, model_key: str
    ) -> None:
        self.client = client
        self.api_key_env = api_key_env
        self.key_env_key = key_env_key
        self.model_key = model_key

    def call(self, send: Callable[[], Any], where: str) -> Any:
        """``send()``, with an authentication failure explained."""
        try:
            return send()
        except HttpStatusError as exc:
            if exc.status not in _AUTH_FAILURES:
                raise
            source = (
                f"the key in ${self.api_key_env} ({self.key_env_key})"
                if self.api_key_env
                else f"no API key (set {self.key_env_key} to the environment variable that "
                "holds one)"
            )
            raise BackendError(
                f"{where} refused the request (HTTP {exc.status}: {exc.detail}); sent {source}"
            ) from None

    def model_entry(self, model: str) -> dict[str, Any] | None:
        """``model``'s ``/models`` entry; None when the server has no model listing. A model
        the server does not list is an error naming the ids it serves."""
        try:
            listing = self.call(lambda: self.client.get("/models"), self.client.url("/models"))
        except HttpStatusError as exc:
            if exc.status in (404, 405, 501):
                return None
            raise
        entries = listing.get("data") if isinstance(listing, dict) else None
        if not isinstance(entries, list):
            return None
        for entry in entries:
            if isinstance(entry, dict) and entry.get("id") == model:
                return entry
        served = ", ".join(str(e.get("id")) for e in entries if isinstance(e, dict))
        raise BackendError(
            f"the server at {self.client.url('/models')} does not serve model {model!r} "
            f"(it serves: {served or 'nothing'}); set {self.model_key} to one of these ids"
        )


def entry_version(entry: dict[str, Any] | None) -> str:
    """``models:<hash>`` of a ``/models`` entry without its volatile fields, or ``unlisted``."""
    if entry is None:
        return "unlisted"
    stable = {k: v for k, v in entry.items() if k not in VOLATILE_MODEL_FIELDS}
    return f"models:{sha256_json(stable)[:16]}"


class OpenAICompatApi:
    """``/embeddings`` and ``/models`` of one model on an OpenAI-compatible server."""

    backend = "openai"

    def __init__(self, model: str, options: OpenAICompatOptions) -> None:
        self.model = model
        key_env_key = "embedding.options.api_key_env"
        client = JsonClient(
            options.base_url,
            options.policy,
            label=f"OpenAI-compatible embedding server (model {model!r})",
            hint="Start the server (llama.cpp, vLLM, TEI, ...) or set embedding.options.base_url "
            "to its URL, including the /v1 prefix.",
            headers=auth_headers(options.api_key_env, key_env_key),
        )
        self.server = OpenAIServer(client, options.api_key_env, key_env_key, "embedding.model")
        self.client = client
        self.where = f"{client.url('/embeddings')} (model {model!r})"

    def describe(self) -> ServedModel:
        return ServedModel(self.model, entry_version(self.server.model_entry(self.model)), None)

    def embed(self, texts: Sequence[str]) -> list[Any]:
        payload = {"model": self.model, "input": list(texts), "encoding_format": "float"}
        answer = self.server.call(lambda: self.client.post("/embeddings", payload), self.where)
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
            raise BackendError(f"{self.where} answered without a 'data' list")
        ordered = sorted(data, key=lambda d: d.get("index", 0))
        return [d.get("embedding") for d in ordered]


class OpenAICompatEncoder(RemoteEncoder):
    """``embedding=openai``: vectors from ``<base_url>/embeddings``."""

    def __init__(self, cfg: EmbeddingConfig) -> None:
        options = read_options(cfg)
        model = required_model(cfg, "nomic-embed-text-v1.5")
        super().__init__(OpenAICompatApi(model, options), options)


def openai_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    """The served model's identity (asks the server, and embeds a probe text)."""
    return OpenAICompatEncoder(cfg).identity
