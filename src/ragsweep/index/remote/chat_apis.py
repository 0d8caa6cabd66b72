"""The chat APIs the judge speaks, registered by name in :data:`CHAT_APIS` (``judge.api``):
``ollama`` (Ollama's native ``/api/chat``) and ``openai`` (``/v1/chat/completions``, spoken
by llama.cpp, vLLM, LM Studio, Ollama's ``/v1`` and hosted APIs).

Importing this module registers them; each API module adds itself to the registry.
"""

from __future__ import annotations

from ragsweep.index.remote import ollama, openai_chat
from ragsweep.index.remote.chat import CHAT_APIS

__all__ = ["CHAT_APIS", "ollama", "openai_chat"]
