"""Model servers over HTTP: the ``ollama`` and ``openai`` embedding backends (registered in
``ragsweep.embedding.BACKENDS`` on import) and the Ollama chat API the judge uses."""

from __future__ import annotations

from ragsweep.remote import ollama, openai_compat
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
    "ollama",
    "openai_compat",
]
