"""Ollama's HTTP API (``/api/show``, ``/api/tags``, ``/api/version``, ``/api/embed``,
``/api/chat``): the ``ollama`` embedding backend and the ``ollama`` chat API of the judge.

A model's identity comes from the server: ``/api/show`` says whether the model exists and
what it can do, ``/api/tags`` gives the digest of its manifest, which changes when a new
version of the same tag is pulled. See docs/embeddings.md and docs/judge.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragsweep.config.schema import EmbeddingConfig, not_hashed
from ragsweep.core.errors import BackendError
from ragsweep.index.encoding import ModelIdentity, options_for
from ragsweep.index.remote.chat import (
    CHAT_APIS,
    ChatReply,
    ChatServer,
    Messages,
    OutputMode,
    Sampling,
    ServedChatModel,
)
from ragsweep.index.remote.encoder import RemoteEncoder, ServedModel, ServerOptions, required_model
from ragsweep.index.remote.http import HttpStatusError, JsonClient, RetryPolicy, auth_headers

DEFAULT_BASE_URL = "http://127.0.0.1:11434"
_THINKING = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)


def ollama_client(
    base_url: str,
    policy: RetryPolicy,
    models: Sequence[str],
    key: str,
    headers: Mapping[str, str] | None = None,
) -> JsonClient:
    """A client for the Ollama server at ``base_url``; ``key`` is the config key that sets
    the URL, named in the hint when the server cannot be reached."""
    pulls = " and ".join(f"`ollama pull {m}`" for m in models)
    names = ", ".join(repr(m) for m in models)
    return JsonClient(
        base_url,
        policy,
        label=f"Ollama server (model{'s' if len(models) > 1 else ''} {names})",
        hint=f"Start it with `ollama serve`, pull the model with {pulls}, or set {key} "
        "to the URL of a running server.",
        headers=headers,
    )


def full_model_name(name: str) -> str:
    """``name`` with Ollama's default tag: ``nomic-embed-text`` → ``nomic-embed-text:latest``."""
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else f"{name}:latest"


@dataclass(frozen=True)
class OllamaModel:
    """A model installed on an Ollama server. ``digest`` is the sha256 of its manifest (as
    ``/api/tags`` lists it); ``capabilities`` is empty when the server does not report them."""

    name: str
    digest: str
    capabilities: tuple[str, ...]


def lookup_model(client: JsonClient, model: str, capability: str) -> OllamaModel:
    """The installed model ``model``, checked to offer ``capability`` (``embedding`` or
    ``completion``). A missing model is an error that says what to pull."""
    try:
        shown = client.post("/api/show", {"model": model})
    except HttpStatusError as exc:
        if exc.status != 404:
            raise
        raise BackendError(
            f"the Ollama server at {client.base_url} has no model {model!r} ({exc.detail}); "
            f"pull it with `ollama pull {model}`"
        ) from None
    capabilities = tuple(shown.get("capabilities") or ()) if isinstance(shown, dict) else ()
    if capabilities and capability not in capabilities:
        raise BackendError(
            f"Ollama model {model!r} at {client.base_url} has no {capability!r} capability "
            f"(it has: {', '.join(capabilities)}); choose another model"
        )
    return OllamaModel(full_model_name(model), _digest(client, model), capabilities)


def _digest(client: JsonClient, model: str) -> str:
    listing = client.get("/api/tags")
    wanted = full_model_name(model)
    entries = listing.get("models") if isinstance(listing, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        names = {full_model_name(str(entry.get(k, ""))) for k in ("name", "model")}
        digest = entry.get("digest")
        if wanted in names and isinstance(digest, str) and digest:
            return digest.removeprefix("sha256:")
    raise BackendError(
        f"the Ollama server at {client.base_url} does not list {wanted!r} with a digest in "
        "/api/tags, so the model's version cannot be identified"
    )


def server_version(client: JsonClient) -> str:
    """The Ollama version from ``/api/version`` (``unknown`` if the server has none)."""
    try:
        answer = client.get("/api/version")
    except HttpStatusError:
        return "unknown"
    version = answer.get("version") if isinstance(answer, dict) else None
    return version if isinstance(version, str) and version else "unknown"


class OllamaChatApi:
    """``judge.api=ollama``: ``/api/chat`` of an Ollama server. JSON output is asked for with
    the verdict's JSON schema in ``format`` (Ollama 0.5 and later constrain the output to it),
    else with ``format: json``."""

    api: str = "ollama"
    json_modes: tuple[OutputMode, ...] = (
        OutputMode("ollama-format-schema", True, lambda body, schema: _set(body, dict(schema))),
        OutputMode("ollama-format-json", False, lambda body, schema: _set(body, "json")),
    )

    def __init__(self, server: ChatServer) -> None:
        headers = auth_headers(server.api_key_env, server.key_env_key)  # for a proxy in front
        self.client = ollama_client(
            server.base_url, server.policy, server.models, server.url_key, headers
        )
        self.base_url = self.client.base_url

    def server_version(self) -> str:
        return server_version(self.client)

    def describe(self, model: str) -> ServedChatModel:
        found = lookup_model(self.client, model, "completion")
        return ServedChatModel(found.name, found.name, found.digest, "ollama-manifest", "-")

    def chat(
        self,
        model: str,
        messages: Messages,
        sampling: Sampling,
        mode: OutputMode | None,
        schema: Mapping[str, Any] | None,
    ) -> ChatReply:
        """One non-streamed ``/api/chat`` turn (a leading ``<think>`` block removed)."""
        options = {
            "temperature": sampling.temperature,
            "seed": sampling.seed,
            "num_ctx": sampling.num_ctx,
            "num_predict": sampling.max_tokens,
        }
        payload: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "stream": False,
            "options": options,
        }
        if mode is not None:
            mode.apply(payload, schema or {})
        answer = self.client.post("/api/chat", payload)
        message = answer.get("message") if isinstance(answer, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise BackendError(
                f"the Ollama server at {self.client.url('/api/chat')} (model {model!r}) "
                "answered without message.content"
            )
        return ChatReply(
            _THINKING.sub("", content),
            answer.get("done_reason") == "length",
        )


def _set(body: dict[str, Any], value: Any) -> None:
    body["format"] = value


CHAT_APIS.add("ollama", OllamaChatApi)


# --- the `ollama` embedding backend ------------------------------------------------------


@dataclass(frozen=True)
class OllamaOptions(ServerOptions):
    """``embedding.options`` of ``embedding=ollama``; ``truncate`` (Ollama's own flag: cut
    inputs longer than the model's context instead of failing) changes vectors."""

    base_url: str = not_hashed(DEFAULT_BASE_URL)
    truncate: bool = True


class OllamaEmbedApi:
    """``/api/embed`` of one model on one Ollama server."""

    backend = "ollama"

    def __init__(self, model: str, options: OllamaOptions) -> None:
        self.model = model
        self.truncate = options.truncate
        self.client = ollama_client(
            options.base_url, options.policy, [model], "embedding.options.base_url"
        )
        self.where = f"Ollama {self.client.url('/api/embed')} (model {model!r})"

    def describe(self) -> ServedModel:
        found = lookup_model(self.client, self.model, "embedding")
        return ServedModel(found.name, server_version(self.client), found.digest)

    def embed(self, texts: Sequence[str]) -> list[Any]:
        payload = {"model": self.model, "input": list(texts), "truncate": self.truncate}
        answer = self.client.post("/api/embed", payload)
        rows = answer.get("embeddings") if isinstance(answer, dict) else None
        if not isinstance(rows, list):
            raise BackendError(f"{self.where} answered without an 'embeddings' list")
        return rows


class OllamaEncoder(RemoteEncoder):
    """``embedding=ollama``: vectors from ``/api/embed``, identity from the server."""

    def __init__(self, cfg: EmbeddingConfig) -> None:
        options: OllamaOptions = options_for(OllamaOptions, cfg)
        model = required_model(cfg, "nomic-embed-text")
        super().__init__(OllamaEmbedApi(model, options), options)


def ollama_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    """The served model's identity (asks the server: ``/api/show`` and a probe embedding)."""
    return OllamaEncoder(cfg).identity
