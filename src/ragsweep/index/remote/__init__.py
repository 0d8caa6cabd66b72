"""HTTP clients for model servers: Ollama's native API and OpenAI-compatible APIs (embeddings
for the ``ollama`` and ``openai`` backends, chat for the judge). Importing this package
registers nothing: the embedding backends are registered by :mod:`ragsweep.index.backends`, the
chat APIs by :mod:`ragsweep.index.remote.chat_apis`."""
