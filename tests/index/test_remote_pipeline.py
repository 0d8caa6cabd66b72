"""Remote embedding backends inside a full run: no API key anywhere MLflow or the run
directory can see, and no cache entry or artifact left by a failed embedding."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.config.app import plain_config
from ragsweep.core.errors import BackendError
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import run_evaluation
from tests.fake_ollama import FakeModelServer, Recorded
from tests.run.test_pipeline import project_overrides

SECRET = "sk-ragsweep-test-5f0e2c9a"


def evaluate(compose_config, project: Path, *extra: str):
    resolved = plain_config(compose_config(*project_overrides(project, *extra)))
    return run_evaluation(resolve(resolved), project / "run"), resolved


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file below ``root`` whose content (a ``.gz`` file's decompressed, as MLflow
    stores ``cases.jsonl`` and ``chunks.jsonl``) contains ``needle``."""
    data = needle.encode("utf-8")
    return [p for p in root.rglob("*") if p.is_file() and data in content(p)]


def content(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.suffix == ".gz" else raw


def test_api_key_never_reaches_mlflow_or_artifacts(
    compose_config,
    mini_project: Path,
    model_server: FakeModelServer,
    tracking_db: Path,
    monkeypatch,
    tmp_path,
) -> None:
    model_server.add_model("embedder-v1", "unused")
    model_server.api_key = SECRET
    monkeypatch.setenv("RAGSWEEP_TEST_KEY", SECRET)
    result, resolved = evaluate(
        compose_config,
        mini_project,
        "embedding=openai",
        "embedding.model=embedder-v1",
        f"embedding.options.base_url={model_server.url}/v1",
        "embedding.options.api_key_env=RAGSWEEP_TEST_KEY",
    )
    sent = {r.headers.get("Authorization") for r in model_server.calls("/v1/embeddings")}
    assert sent == {f"Bearer {SECRET}"}  # the key was used...

    client = MlflowClient(tracking_uri="sqlite:///" + resolved["tracking"]["default_db"])
    run = client.get_run(result.run_id)
    assert run.data.params["embedding.options.api_key_env"] == "RAGSWEEP_TEST_KEY"
    logged = [*run.data.params.items(), *run.data.tags.items(), *run.data.metrics]
    assert not [item for item in logged if SECRET in str(item)]  # ...but never logged
    downloaded = Path(client.download_artifacts(result.run_id, "", str(tmp_path / "dl")))
    assert {"config.yaml", "cases.jsonl.gz", "report.md"} <= {p.name for p in downloaded.iterdir()}
    assert files_containing(downloaded, SECRET) == []
    # nor anywhere on disk: MLflow database, artifact store, run directory, caches
    assert files_containing(tmp_path, SECRET) == []


def test_failed_embedding_leaves_no_index_cache_or_artifacts(
    compose_config, mini_project: Path, model_server: FakeModelServer
) -> None:
    model_server.add_model("fake-embed", "a" * 64)

    def fail_batches(request: Recorded):
        if request.path == "/api/embed" and len(request.body["input"]) > 1:
            return 500, {"error": "out of memory"}
        return None  # identity probes (one text) still work

    model_server.intercepts.append(fail_batches)
    overrides = (
        "tracking.enabled=false",
        "embedding=ollama",
        "embedding.model=fake-embed",
        f"embedding.options.base_url={model_server.url}",
        "embedding.options.retries=1",
        "embedding.options.backoff=0.01",
    )
    with pytest.raises(BackendError, match="HTTP 500: out of memory"):
        evaluate(compose_config, mini_project, *overrides)
    cache = mini_project / "outputs" / "cache"
    shards = [p for p in (cache / "embeddings").rglob("meta.json")]
    assert shards == []
    indexes = [p for p in (cache / "dense_index").rglob("meta.json")]
    assert indexes == []
    assert not (mini_project / "run").exists()

    model_server.intercepts.clear()  # the server recovers: the run completes from scratch
    result, _ = evaluate(compose_config, mini_project, *overrides)
    assert result.summary.counts["n_cases"] == 4
    assert len(list((cache / "dense_index").rglob("meta.json"))) == 1


def test_a_tag_pulled_again_within_one_process_is_embedded_again(
    compose_config, mini_project: Path, model_server: FakeModelServer
) -> None:
    overrides = (
        "tracking.enabled=false",
        "embedding=ollama",
        "embedding.model=fake-embed",
        f"embedding.options.base_url={model_server.url}",
    )
    model_server.add_model("fake-embed", "a" * 64)
    first, _ = evaluate(compose_config, mini_project, *overrides)
    model_server.add_model("fake-embed", "b" * 64)  # `ollama pull` brought new weights
    second, _ = evaluate(compose_config, mini_project, *overrides)
    assert first.cache_metrics["cache/dense_index/misses"] == 1
    assert second.cache_metrics["cache/dense_index/misses"] == 1  # not the old weights' index
    assert second.cache_metrics["cache/query_embeddings/hits"] == 0
    assert second.config_hash != first.config_hash
