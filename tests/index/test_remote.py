"""Remote embedding backends (ollama, openai) against a real local HTTP server."""

from __future__ import annotations

import numpy as np
import pytest

from ragsweep.config.schema import EmbeddingConfig
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.index.backends import BACKENDS
from ragsweep.index.encoding import encode_in_batches, l2_normalize
from ragsweep.index.remote.encoder import PROBE_TEXT
from ragsweep.index.remote.http import ServerUnreachable
from ragsweep.index.remote.ollama import OllamaEncoder
from ragsweep.index.remote.openai_compat import OpenAICompatEncoder
from tests.fake_ollama import DIMENSION, FakeModelServer, fake_embedding
from tests.ports import free_port

FAST = {"retries": 1, "backoff": 0.01, "timeout": 10.0}


def ollama_cfg(
    server: FakeModelServer | str, model: str = "fake-embed", **options
) -> EmbeddingConfig:
    url = server if isinstance(server, str) else server.url
    return EmbeddingConfig("ollama", model, {"base_url": url, **FAST, **options})


def openai_cfg(server: FakeModelServer, model: str = "fake-embed", **options) -> EmbeddingConfig:
    return EmbeddingConfig("openai", model, {"base_url": f"{server.url}/v1", **FAST, **options})


def embed_inputs(server: FakeModelServer) -> list[list[str]]:
    """The texts of every /api/embed request except the identity probes."""
    batches = [r.body["input"] for r in server.calls("/api/embed")]
    return [b for b in batches if b != [PROBE_TEXT]]


def test_ollama_identity_comes_from_the_server(model_server: FakeModelServer) -> None:
    model_server.add_model("fake-embed", "a" * 64)
    identity = BACKENDS.get("ollama").identity(ollama_cfg(model_server, batch_size=7))
    assert identity.backend == "ollama"
    assert identity.name == "fake-embed:latest"
    assert identity.digest == "a" * 64
    assert identity.version == "0.9.0-fake"  # the Ollama server's version
    assert identity.dimension == DIMENSION  # observed on the probe text
    assert identity.normalized is True
    assert identity.options == {"truncate": True}  # transport options do not count

    model_server.add_model("fake-embed", "b" * 64)  # `ollama pull` of a new version
    pulled = BACKENDS.get("ollama").identity(ollama_cfg(model_server))
    assert pulled.digest == "b" * 64
    assert pulled.key != identity.key
    assert identity.differences(pulled) == ["digest"]


def test_ollama_batches_requests_and_normalizes(model_server: FakeModelServer) -> None:
    model_server.add_model("fake-embed", "a" * 64)
    encoder = OllamaEncoder(ollama_cfg(model_server, batch_size=4))
    texts = [f"text number {i}" for i in range(10)]
    advanced: list[int] = []
    vectors = encode_in_batches(encoder, texts, advanced.append)
    assert [len(b) for b in embed_inputs(model_server)] == [4, 4, 2]
    assert [t for b in embed_inputs(model_server) for t in b] == texts
    assert advanced == [4, 4, 2]
    expected = l2_normalize(np.array([fake_embedding(t) for t in texts]))
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)
    assert vectors.dtype == np.float32
    # one call with more texts than batch_size is still split into batch_size requests
    encoder.encode(texts[:9])
    assert [len(b) for b in embed_inputs(model_server)][3:] == [4, 4, 1]
    assert all(r.body["truncate"] is True for r in model_server.calls("/api/embed"))


def test_ollama_retries_5xx_then_succeeds(model_server: FakeModelServer) -> None:
    model_server.add_model("fake-embed", "a" * 64)
    encoder = OllamaEncoder(ollama_cfg(model_server, retries=2))
    model_server.fail("/api/embed", 500, 503)
    vectors = encoder.encode(["refunds"])
    assert vectors.shape == (1, DIMENSION)
    assert len(embed_inputs(model_server)) == 3  # two failures, then the answer


def test_ollama_gives_up_after_retries_naming_url_and_model(model_server: FakeModelServer) -> None:
    model_server.add_model("fake-embed", "a" * 64)
    encoder = OllamaEncoder(ollama_cfg(model_server, retries=1))
    model_server.fail("/api/embed", 500, 500)
    with pytest.raises(BackendError, match="HTTP 500") as caught:
        encoder.encode(["refunds"])
    assert f"{model_server.url}/api/embed" in str(caught.value)
    assert "'fake-embed'" in str(caught.value)
    assert len(embed_inputs(model_server)) == 2  # first attempt + 1 retry


def test_4xx_is_not_retried(model_server: FakeModelServer) -> None:
    model_server.add_model("fake-embed", "a" * 64)
    encoder = OllamaEncoder(ollama_cfg(model_server, retries=3))
    model_server.fail("/api/embed", 400)
    with pytest.raises(BackendError, match="HTTP 400: scripted failure"):
        encoder.encode(["refunds"])
    assert len(embed_inputs(model_server)) == 1


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there any more


def test_missing_server_says_what_to_start() -> None:
    url = closed_port_url()
    with pytest.raises(ServerUnreachable) as caught:
        BACKENDS.get("ollama").identity(ollama_cfg(url, model="nomic-embed-text"))
    message = str(caught.value)
    assert f"{url}/api/show" in message
    assert "2 attempts" in message  # retried once
    assert "ollama serve" in message
    assert "ollama pull nomic-embed-text" in message
    assert "embedding.options.base_url" in message


def test_dropped_connection_is_retried(model_server: FakeModelServer) -> None:
    """A connection error mid-run is retried: the server answers on the next attempt."""
    model_server.add_model("fake-embed", "a" * 64)
    encoder = OllamaEncoder(ollama_cfg(model_server, retries=2))
    calls = {"n": 0}

    def drop_first_connection(request):
        calls["n"] += 1
        if request.path == "/api/embed" and calls["n"] == 1:
            raise ConnectionAbortedError  # handler dies: the client sees a broken connection
        return None

    model_server.requests.clear()
    model_server.intercepts.append(drop_first_connection)
    assert encoder.encode(["refunds"]).shape == (1, DIMENSION)
    assert len(model_server.calls("/api/embed")) == 2


def test_missing_model_says_what_to_pull(model_server: FakeModelServer) -> None:
    with pytest.raises(BackendError) as caught:
        BACKENDS.get("ollama").identity(ollama_cfg(model_server, model="nomic-embed-text"))
    message = str(caught.value)
    assert model_server.url in message
    assert "no model 'nomic-embed-text'" in message
    assert "`ollama pull nomic-embed-text`" in message
    assert not model_server.calls("/api/embed")


def test_chat_model_is_not_an_embedding_model(model_server: FakeModelServer) -> None:
    model_server.add_model("llama3", "c" * 64, "completion")
    with pytest.raises(BackendError, match="no 'embedding' capability"):
        OllamaEncoder(ollama_cfg(model_server, model="llama3"))


def test_answers_of_the_wrong_shape_are_errors(model_server: FakeModelServer) -> None:
    model_server.add_model("fake-embed", "a" * 64)
    encoder = OllamaEncoder(ollama_cfg(model_server))
    model_server.add_model("fake-embed", "a" * 64, dimension=DIMENSION // 2)
    with pytest.raises(BackendError, match=f"dimension {DIMENSION // 2} at position 0, expected"):
        encoder.encode(["refunds"])
    model_server.intercepts.append(lambda r: (200, {"embeddings": [[1.0] * DIMENSION]}))
    with pytest.raises(BackendError, match="returned 1 embeddings for 2 texts"):
        encoder.encode(["a", "b"])


def test_options_are_validated() -> None:
    with pytest.raises(ConfigError, match=r"embedding\.model is required"):
        BACKENDS.get("ollama").identity(EmbeddingConfig("ollama", "", {}))
    with pytest.raises(ConfigError, match=r"embedding\.options\.batch_size=0 must be >= 1"):
        BACKENDS.get("ollama").identity(EmbeddingConfig("ollama", "m", {"batch_size": 0}))
    with pytest.raises(ConfigError, match=r"embedding\.options\.base_url='localhost:1'"):
        BACKENDS.get("openai").identity(EmbeddingConfig("openai", "m", {"base_url": "localhost:1"}))


# --- OpenAI-compatible ---------------------------------------------------------------


def test_openai_identity_batches_and_order(model_server: FakeModelServer, monkeypatch) -> None:
    model_server.add_model("embedder-v1", "unused")
    model_server.api_key = "sk-fake-123"
    monkeypatch.setenv("RAGSWEEP_TEST_KEY", "sk-fake-123")
    cfg = openai_cfg(model_server, "embedder-v1", batch_size=2, api_key_env="RAGSWEEP_TEST_KEY")
    encoder = OpenAICompatEncoder(cfg)
    identity = encoder.identity
    assert (identity.backend, identity.name, identity.dimension) == ("openai", "embedder-v1", 64)
    assert identity.digest is None  # no weight digest from such servers
    assert identity.version.startswith("models:")
    assert identity.options == {}  # base_url, batch size and the key's variable do not count
    # /v1/models stamps a new `created` on every call; the identity must not change with it
    assert BACKENDS.get("openai").identity(cfg) == identity

    texts = ["alpha", "beta", "gamma"]
    vectors = encoder.encode(texts)  # the server answers rows in reverse order
    np.testing.assert_allclose(
        vectors, l2_normalize(np.array([fake_embedding(t) for t in texts])), rtol=1e-6
    )
    batches = [r.body["input"] for r in model_server.calls("/v1/embeddings")]
    batches = [b for b in batches if b != [PROBE_TEXT]]
    assert batches == [["alpha", "beta"], ["gamma"]]
    headers = [r.headers["Authorization"] for r in model_server.calls("/v1/embeddings")]
    assert set(headers) == {"Bearer sk-fake-123"}


def test_openai_rejected_key_names_the_variable_not_the_key(
    model_server: FakeModelServer, monkeypatch
) -> None:
    model_server.add_model("embedder-v1", "unused")
    model_server.api_key = "sk-right"
    monkeypatch.setenv("RAGSWEEP_TEST_KEY", "sk-wrong-secret")
    with pytest.raises(BackendError) as caught:
        OpenAICompatEncoder(
            openai_cfg(model_server, "embedder-v1", api_key_env="RAGSWEEP_TEST_KEY")
        )
    assert "HTTP 401" in str(caught.value)
    assert "$RAGSWEEP_TEST_KEY" in str(caught.value)
    assert "sk-wrong-secret" not in str(caught.value)


def test_openai_key_only_from_the_environment(model_server: FakeModelServer, monkeypatch) -> None:
    monkeypatch.delenv("RAGSWEEP_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="environment variable RAGSWEEP_TEST_KEY is not set"):
        OpenAICompatEncoder(openai_cfg(model_server, "m", api_key_env="RAGSWEEP_TEST_KEY"))
    with pytest.raises(ConfigError, match="api_key is not accepted"):
        OpenAICompatEncoder(openai_cfg(model_server, "m", api_key="sk-in-config"))


def test_openai_model_listing(model_server: FakeModelServer) -> None:
    model_server.add_model("embedder-v1", "unused")
    with pytest.raises(
        BackendError, match=r"does not serve model 'other' \(it serves: embedder-v1\)"
    ):
        OpenAICompatEncoder(openai_cfg(model_server, "other"))
    model_server.list_openai_models = False  # e.g. a server without /v1/models
    assert OpenAICompatEncoder(openai_cfg(model_server, "embedder-v1")).identity.version == (
        "unlisted"
    )
