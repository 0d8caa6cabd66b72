"""The ``ollama`` and ``openai`` backends: dense models served over HTTP (the clients live
in :mod:`ragsweep.remote`)."""

from __future__ import annotations

from ragsweep.backends.base import BACKENDS
from ragsweep.backends.dense import DenseBackend
from ragsweep.remote.ollama import OllamaEncoder, ollama_identity
from ragsweep.remote.openai_compat import OpenAICompatEncoder, openai_identity

BACKENDS.add("ollama", DenseBackend(ollama_identity, OllamaEncoder))
BACKENDS.add("openai", DenseBackend(openai_identity, OpenAICompatEncoder))
