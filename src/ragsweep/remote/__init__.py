"""Model servers over HTTP: the ``ollama`` and ``openai`` embedding backends (registered in
``ragsweep.embedding.BACKENDS`` on import) and the ``ollama`` and ``openai`` chat APIs the
judge uses (registered in ``ragsweep.remote.chat.CHAT_APIS``)."""

from __future__ import annotations

from ragsweep.remote import chat, ollama, openai_chat, openai_compat
from ragsweep.remote.http import HttpStatusError, JsonClient, RetryPolicy, ServerUnreachable
from ragsweep.remote.ollama import OllamaEncoder
from ragsweep.remote.openai_compat import OpenAICompatEncoder

__all__ = [
    "HttpStatusError",
    "JsonClient",
    "OllamaEncoder",
    "OpenAICompatEncoder",
    "RetryPolicy",
    "ServerUnreachable",
    "chat",
    "ollama",
    "openai_chat",
    "openai_compat",
]
