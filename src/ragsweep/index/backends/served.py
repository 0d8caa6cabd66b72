"""The ``ollama`` and ``openai`` backends: dense models served over HTTP (the clients live
in :mod:`ragsweep.index.remote`)."""

from __future__ import annotations

from ragsweep.index.backends.dense import DenseBackend
from ragsweep.index.base import BACKENDS
from ragsweep.index.remote.ollama import OllamaEncoder, ollama_identity
from ragsweep.index.remote.openai_compat import OpenAICompatEncoder, openai_identity

BACKENDS.add("ollama", DenseBackend(ollama_identity, OllamaEncoder))
BACKENDS.add("openai", DenseBackend(openai_identity, OpenAICompatEncoder))
