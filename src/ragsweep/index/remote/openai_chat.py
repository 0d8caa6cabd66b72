"""``judge.api=openai``: chat through any OpenAI-compatible ``/v1/chat/completions``
(llama.cpp's servers, vLLM, LM Studio, Ollama's ``/v1``, hosted APIs).

JSON output is asked for, best first, with ``response_format`` ``json_schema`` (the OpenAI
form), ``json_object`` carrying the schema (llama-cpp-python's form), plain ``json_object``,
and finally the prompt alone; :class:`~ragsweep.index.remote.chat.JsonChat` keeps the first one
the server accepts.

Identity is what the server gives away: the model id from ``/models`` (which must list the
configured model when the server lists any), a hash of that entry, the sha256 of the weights
file when the server runs on this machine and names a file that exists here (llama.cpp
serves a model under its file path unless it was given an alias), and the server's version
from the first endpoint that reports one (``/version``, ``/props``, ``/openapi.json``).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ragsweep.core.errors import BackendError
from ragsweep.index.remote.chat import (
    CHAT_APIS,
    ChatReply,
    ChatServer,
    Messages,
    OutputMode,
    Sampling,
    ServedChatModel,
)
from ragsweep.index.remote.http import JsonClient, ServerUnreachable, auth_headers
from ragsweep.index.remote.openai_compat import OpenAIServer, entry_version

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""Hosts whose file paths are this machine's: only their model files are digested."""
_DIGEST_BLOCK = 1 << 20


def _response_format(value: Callable[[Mapping[str, Any]], dict[str, Any]]) -> Any:
    def apply(body: dict[str, Any], schema: Mapping[str, Any]) -> None:
        body["response_format"] = value(schema)

    return apply


def _json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "strict": True, "schema": dict(schema)},
    }


JSON_MODES = (
    OutputMode("json_schema", True, _response_format(_json_schema)),
    OutputMode(
        "json_object+schema",
        True,
        _response_format(lambda schema: {"type": "json_object", "schema": dict(schema)}),
    ),
    OutputMode("json_object", False, _response_format(lambda schema: {"type": "json_object"})),
    OutputMode("prompt-only", False, lambda body, schema: None),
)


def _version_field(path: str, *keys: str) -> tuple[str, Callable[[Any], str | None]]:
    """A version probe: GET ``path`` and read the nested ``keys`` of its JSON answer."""

    def read(answer: Any) -> str | None:
        for key in keys:
            answer = answer.get(key) if isinstance(answer, dict) else None
        return answer if isinstance(answer, str) and answer else None

    return path, read


def _openapi_version(answer: Any) -> str | None:
    info = answer.get("info") if isinstance(answer, dict) else None
    if not isinstance(info, dict) or not info.get("version"):
        return None
    return f"{info.get('title', 'openapi')} {info['version']}"


VERSION_PROBES: tuple[tuple[str, Callable[[Any], str | None]], ...] = (
    _version_field("/version", "version"),  # vLLM
    _version_field("/props", "build_info"),  # llama.cpp's llama-server
    ("/openapi.json", _openapi_version),  # FastAPI servers: llama-cpp-python
)
"""Where servers report their version, relative to the server root (``base_url`` without
its ``/v1``); the first answer that has one wins."""


class OpenAIChatApi:
    """Chat completions, model listing and server version of one OpenAI-compatible server."""

    api: str = "openai"
    json_modes: tuple[OutputMode, ...] = JSON_MODES

    def __init__(self, server: ChatServer) -> None:
        names = ", ".join(repr(m) for m in server.models)
        headers = auth_headers(server.api_key_env, server.key_env_key)
        plural = "s" if len(server.models) > 1 else ""
        label = f"OpenAI-compatible chat server (model{plural} {names})"
        hint = (
            "Start the server (e.g. `python -m llama_cpp.server --model FILE.gguf`, "
            f"`llama-server -m FILE.gguf`, `vllm serve MODEL`) or set {server.url_key} to its "
            "URL, including the /v1 prefix."
        )
        self.client = JsonClient(server.base_url, server.policy, label, hint, headers)
        self.root = JsonClient(server_root(server.base_url), server.policy, label, hint, headers)
        self.server = OpenAIServer(self.client, server.api_key_env, server.key_env_key, "judge")
        self.base_url = self.client.base_url

    def server_version(self) -> str:
        """The first version one of ``VERSION_PROBES`` finds, else ``unknown``. Only an
        unreachable server is an error: any other failure means "not this kind of server"."""
        for path, read in VERSION_PROBES:
            try:
                version = read(self.root.get(path))
            except ServerUnreachable:
                raise
            except BackendError:
                continue
            if version:
                return version
        return "unknown"

    def describe(self, model: str) -> ServedChatModel:
        entry = self.server.model_entry(model)
        path = _model_file(self.base_url, model)
        digest = file_sha256(str(path), *_stat(path)) if path else None
        return ServedChatModel(
            model, model, digest, "file-sha256" if digest else "none", entry_version(entry)
        )

    def chat(
        self,
        model: str,
        messages: Messages,
        sampling: Sampling,
        mode: OutputMode | None,
        schema: Mapping[str, Any] | None,
    ) -> ChatReply:
        payload: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "temperature": sampling.temperature,
            "seed": sampling.seed,
            "max_tokens": sampling.max_tokens,
            "stream": False,
        }
        if mode is not None:
            mode.apply(payload, schema or {})
        where = f"{self.client.url('/chat/completions')} (model {model!r})"
        answer = self.server.call(lambda: self.client.post("/chat/completions", payload), where)
        choices = answer.get("choices") if isinstance(answer, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices else {}
        choice = choice if isinstance(choice, dict) else {}
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise BackendError(f"{where} answered without choices[0].message.content")
        return ChatReply(content, choice.get("finish_reason") == "length")


def server_root(base_url: str) -> str:
    """``base_url`` without a trailing ``/v1`` API prefix."""
    trimmed = base_url.rstrip("/")
    return trimmed.removesuffix("/v1") if trimmed.endswith("/v1") else trimmed


def _model_file(base_url: str, model: str) -> Path | None:
    """The weights file a local server serves ``model`` from, when the id is its path."""
    if urlsplit(base_url).hostname not in LOOPBACK_HOSTS:
        return None
    path = Path(model)
    return path.resolve() if path.is_absolute() and path.is_file() else None


def _stat(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_size, info.st_mtime_ns


@functools.lru_cache(maxsize=16)
def file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a file's bytes, computed once per (path, size, modification time) in a
    process (a 250 MB model file takes about a second)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_DIGEST_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


CHAT_APIS.add("openai", OpenAIChatApi)
