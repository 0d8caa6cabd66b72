"""Config validation: bad values fail before any work, naming the key and allowed range."""

from __future__ import annotations

import pytest

from ragsweep.cli import plain_config
from ragsweep.config import ChunkingConfig, RunConfig, from_mapping
from ragsweep.errors import ConfigError
from ragsweep.pipeline import config_hash, validate_before_work


def run_config(compose_config, *overrides: str) -> RunConfig:
    return RunConfig.from_container(plain_config(compose_config(*overrides)))


def test_default_config_validates(compose_config) -> None:
    cfg = run_config(compose_config)
    assert cfg.chunking.mode == "fixed"
    assert cfg.eval.split == "tuning"
    assert cfg.top_k == 10
    validate_before_work(cfg)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["chunking.size=0"], "chunking.size=0 must be > 0"),
        (["chunking.size=100", "chunking.overlap=100"], "chunking.overlap=100 must satisfy"),
        (["chunking.overlap=-1"], "0 <= overlap < chunking.size"),
        (["eval.ks=[5,1]"], "eval.ks=[5, 1] must be strictly increasing"),
        (["eval.min_span_overlap=0"], "eval.min_span_overlap=0.0 must be in (0, 1]"),
        (["eval.split=holdout"], "reserved for promotion"),
        (["eval.split=dev"], "eval.split='dev' is not one of: tuning, holdout"),
        (["golden.holdout_fraction=1.0"], "golden.holdout_fraction=1.0 must be in [0, 1)"),
        (["chunking.size=big"], "chunking.size must be an integer"),
        (["+chunking.sise=3"], "chunking.sise is not a known key"),
        (["retrieval.top_k=0"], "retrieval.top_k=0 must be > 0"),
    ],
)
def test_invalid_values_name_key_and_range(compose_config, overrides, message) -> None:
    with pytest.raises(ConfigError) as info:
        run_config(compose_config, *overrides)
    assert message in str(info.value)


def test_typo_in_key_suggests_the_right_one(compose_config) -> None:
    with pytest.raises(ConfigError) as info:
        run_config(compose_config, "+chunking.sise=3")
    assert "did you mean chunking.size?" in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["chunking.mode=sentense"], "chunking.mode='sentense' is not one of: fixed, heading"),
        (["embedding.backend=bm52"], "did you mean 'bm25'?"),
        (["preprocess.steps=[nfck]"], "preprocess.steps='nfck' is not one of"),
        (["eval.objective=recall_at_7"], "eval.objective='recall_at_7' is not computed"),
        (["+embedding.options.k2=1"], "embedding.options.k2 is not a known key"),
        (["embedding.options.b=2"], "embedding.options.b=2.0 must be in [0, 1]"),
    ],
)
def test_registry_names_fail_before_work(compose_config, overrides, message) -> None:
    cfg = run_config(compose_config, *overrides)
    with pytest.raises(ConfigError) as info:
        validate_before_work(cfg)
    assert message in str(info.value)


def test_holdout_needs_explicit_flag(compose_config) -> None:
    cfg = run_config(compose_config, "eval.split=holdout", "eval.allow_holdout=true")
    assert cfg.eval.split == "holdout"


def test_config_hash_ignores_paths_tracking_and_speed_options(compose_config) -> None:
    def hash_of(*overrides: str) -> str:
        cfg = run_config(compose_config, *overrides)
        preprocessor, model = validate_before_work(cfg)
        return config_hash(cfg, preprocessor, model)

    base = hash_of()
    assert hash_of("tracking.experiment=x") == base
    assert hash_of("paths.root_dir=/elsewhere") == base
    assert hash_of("chunking.size=400") != base
    assert hash_of("eval.ks=[1,5]") != base
    assert hash_of("embedding.options.k1=1.2") != base
    dense = hash_of("embedding=use_m3")
    assert dense != base
    assert hash_of("embedding=use_m3", "embedding.options.threads=1") == dense


def test_config_hash_follows_the_synonym_file_content(compose_config, tmp_path) -> None:
    def hash_of(synonyms: str) -> str:
        cfg = run_config(
            compose_config, "preprocess=nfkc_synonyms", f"preprocess.synonyms_path={synonyms}"
        )
        preprocessor, model = validate_before_work(cfg)
        return config_hash(cfg, preprocessor, model)

    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("groups:\n  - [sign in, login]\n", encoding="utf-8")
    second.write_text("groups:\n  - [sign in, login]\n", encoding="utf-8")
    assert hash_of(str(first)) == hash_of(str(second))  # same content, other path
    second.write_text("groups:\n  - [sign in, logout]\n", encoding="utf-8")
    assert hash_of(str(first)) != hash_of(str(second))


def test_from_mapping_rejects_wrong_types() -> None:
    with pytest.raises(ConfigError, match=r"chunking\.heading_prefix must be true or false"):
        from_mapping(ChunkingConfig, {"heading_prefix": "yes"}, "chunking")
    with pytest.raises(ConfigError, match=r"chunking\.size must be an integer"):
        from_mapping(ChunkingConfig, {"size": 1.5}, "chunking")
