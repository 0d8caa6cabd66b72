"""Chat completion over HTTP for the generator and the judge: the API protocol, its registry
(``judge.api``: ``ollama`` for Ollama's ``/api/chat``, ``openai`` for any OpenAI-compatible
``/v1/chat/completions``), and the negotiation of constrained JSON output.

Each API offers a ladder of ways to ask for JSON (best first: output constrained to a JSON
schema, then plain JSON mode, ...). :class:`JsonChat` walks the ladder on the first call: a
mode the server refuses with HTTP 400/422 is skipped, the first mode it accepts is kept for
every later call (an HTTP 5xx whose message names the mode's field counts as a refusal
too). Whether the server then honoured the schema is measured from its replies
(see ``ragsweep.judge``), never assumed. See docs/judge.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ragsweep.core.registry import Registry
from ragsweep.index.remote.http import HttpStatusError, RetryPolicy

log = logging.getLogger(__name__)

Messages = Sequence[Mapping[str, str]]
REFUSED_MODE_STATUSES = (400, 422)
"""HTTP statuses with which a server refuses a request parameter it does not support."""
MODE_FIELDS = ("response_format", "json_schema", "format")
"""Request fields an output mode sets: a server error naming one refuses the mode
(llama-cpp-python answers an unknown ``response_format`` type with HTTP 500)."""


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one call. ``temperature`` and ``seed`` as the API defines them;
    ``max_tokens``: cap on the reply's length in tokens; ``num_ctx``: context window in tokens
    (Ollama only: OpenAI-compatible servers set it when they start)."""

    temperature: float
    seed: int
    max_tokens: int
    num_ctx: int


@dataclass(frozen=True)
class ChatReply:
    """The assistant's ``text``; ``truncated`` is true when the server stopped at
    ``max_tokens`` (finish reason ``length``)."""

    text: str
    truncated: bool


@dataclass(frozen=True)
class ServedChatModel:
    """A chat model as its server describes it.

    ``name``: the configured name in canonical form (Ollama adds ``:latest``); ``served_id``:
    the id the server lists it under; ``digest``: sha256 of the weights or of their manifest,
    None when the server gives no way to know; ``digest_source``: where the digest came from
    (``ollama-manifest``, ``file-sha256`` or ``none``); ``version``: the server's own
    description of the model (a hash of its listing entry), for servers without a digest.
    """

    name: str
    served_id: str
    digest: str | None
    digest_source: str
    version: str

    @property
    def fingerprint(self) -> str:
        """What identifies the weights: the digest, else the listing's version hash."""
        return self.digest or f"{self.served_id}@{self.version}"


@dataclass(frozen=True)
class OutputMode:
    """One way to ask a server for JSON. ``name`` is recorded with every verdict;
    ``constrained`` says whether the request carries the JSON schema (the server may still
    ignore it); ``apply(payload, schema)`` adds the mode's fields to a request body."""

    name: str
    constrained: bool
    apply: Callable[[dict[str, Any], Mapping[str, Any]], None]


class ChatApi(Protocol):
    """One chat protocol on one server."""

    api: str
    base_url: str
    json_modes: tuple[OutputMode, ...]
    """Ways to ask for JSON output, best first; the last one must always be accepted."""

    def server_version(self) -> str:
        """The server software's version, ``unknown`` when it does not say."""
        ...

    def describe(self, model: str) -> ServedChatModel:
        """Look the model up (an error naming what to do when it is not served)."""
        ...

    def chat(
        self,
        model: str,
        messages: Messages,
        sampling: Sampling,
        mode: OutputMode | None,
        schema: Mapping[str, Any] | None,
    ) -> ChatReply:
        """One non-streamed chat turn; JSON output per ``mode`` (None: free text)."""
        ...


@dataclass(frozen=True)
class ChatServer:
    """Where the chat API is and how to reach it: ``base_url`` (the config key ``url_key``
    sets it), retry ``policy``, ``api_key_env`` (environment variable holding an API key,
    None: no key is sent) and the configured ``models`` (named in error hints)."""

    base_url: str
    policy: RetryPolicy
    api_key_env: str | None
    models: tuple[str, ...]
    url_key: str = "judge.base_url"
    key_env_key: str = "judge.api_key_env"


CHAT_APIS: Registry[Callable[[ChatServer], ChatApi]] = Registry("judge.api")
"""``judge.api`` name → factory of the chat API client; filled by the modules that
implement the APIs (``ragsweep.index.remote.ollama``, ``ragsweep.index.remote.openai_compat``)."""


class JsonChat:
    """Chat calls that must return JSON: negotiates the best accepted :class:`OutputMode` on
    the first call (walking ``api.json_modes``) and keeps it for the life of the object."""

    def __init__(self, api: ChatApi) -> None:
        self.api = api
        self.mode: OutputMode | None = None

    def chat(
        self, model: str, messages: Messages, sampling: Sampling, schema: Mapping[str, Any]
    ) -> tuple[ChatReply, OutputMode]:
        """One JSON turn and the output mode it was asked with."""
        if self.mode is not None:
            return self.api.chat(model, messages, sampling, self.mode, schema), self.mode
        refused: list[str] = []
        for mode in self.api.json_modes:
            try:
                reply = self.api.chat(model, messages, sampling, mode, schema)
            except HttpStatusError as exc:
                if not refuses_mode(exc) or mode is self.api.json_modes[-1]:
                    raise
                refused.append(f"{mode.name} (HTTP {exc.status}: {exc.detail[:120]})")
                continue
            if refused:
                log.warning(
                    "%s refused JSON output mode(s) %s; using %s",
                    self.api.base_url,
                    "; ".join(refused),
                    mode.name,
                )
            self.mode = mode
            return reply, mode
        raise AssertionError("unreachable: the last mode returns or raises")


def refuses_mode(exc: HttpStatusError) -> bool:
    """Whether an error answer means "this output mode is not supported"."""
    if exc.status in REFUSED_MODE_STATUSES:
        return True
    return exc.status >= 500 and any(name in exc.detail for name in MODE_FIELDS)
