"""Config validation: bad values fail before any work, naming the key and allowed range."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from ragsweep.config.app import plain_config
from ragsweep.config.schema import ChunkingConfig, from_mapping, result_fields
from ragsweep.core.errors import ConfigError
from ragsweep.run.config import RunConfig, hashed_groups, resolve

REPO = Path(__file__).resolve().parents[2]


def run_config(compose_config, *overrides: str) -> RunConfig:
    return RunConfig.from_container(plain_config(compose_config(*overrides)))


def test_default_config_validates(compose_config) -> None:
    cfg = run_config(compose_config)
    assert cfg.chunking.mode == "fixed"
    assert cfg.eval.split == "tuning"
    assert cfg.top_k == 10
    assert resolve(cfg).objective.name == "recall_at_5"


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
        resolve(cfg)
    assert message in str(info.value)


def test_holdout_needs_explicit_flag(compose_config) -> None:
    cfg = run_config(compose_config, "eval.split=holdout", "eval.allow_holdout=true")
    assert cfg.eval.split == "holdout"


def test_config_hash_ignores_paths_tracking_and_speed_options(compose_config) -> None:
    def hash_of(*overrides: str) -> str:
        return resolve(run_config(compose_config, *overrides)).config_hash

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
        return resolve(cfg).config_hash

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


def test_run_config_keeps_its_source_and_the_judge_group(compose_config) -> None:
    judge = ("judge=ollama", "judge.generator=g", "judge.judge=j", "judge.context_chunks=3")
    source = plain_config(compose_config(*judge))
    cfg = RunConfig.from_container(source)
    assert dict(cfg.source) == source
    assert cfg.judge.context_chunks == 3 and cfg.judge.enabled
    assert not RunConfig.from_container(plain_config(compose_config())).judge.enabled


def test_hashed_groups_are_an_allow_list_from_field_metadata() -> None:
    assert hashed_groups() == (
        "corpus",
        "golden",
        "preprocess",
        "chunking",
        "embedding",
        "retrieval",
        "eval",
        "judge",
        "rerank",
    )


@dataclasses.dataclass(frozen=True)
class _WithNewField(ChunkingConfig):
    """A chunking config that gained a field, as a future change would add one."""

    min_chars: int = 0


def test_a_new_hashed_field_changes_the_chunks_key() -> None:
    from ragsweep.config.schema import CorpusConfig
    from ragsweep.data.corpus import load_corpus
    from ragsweep.index.stages import chunks_key

    demo_corpus = load_corpus(CorpusConfig(path=str(REPO / "demo" / "corpus")))
    plain, grown = ChunkingConfig(), _WithNewField(min_chars=50)
    assert "min_chars" in result_fields(grown)
    assert chunks_key(demo_corpus, grown) != chunks_key(demo_corpus, plain)
    assert chunks_key(demo_corpus, _WithNewField(min_chars=50)) == chunks_key(demo_corpus, grown)


def test_judge_settings_are_hashed_only_when_the_judge_runs(compose_config, tmp_path) -> None:
    def hash_of(*overrides: str) -> str:
        return resolve(run_config(compose_config, *overrides)).config_hash

    off = hash_of("+judge.context_chunks=3")
    assert off == hash_of("+judge.context_chunks=8")  # the judge is off: nothing changes
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(
        (REPO / "conf" / "rubrics" / "judge_default.yaml").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    on = ("judge=ollama", "judge.generator=g", "judge.judge=j", f"judge.rubric={rubric}")
    three, eight = hash_of(*on, "judge.context_chunks=3"), hash_of(*on, "judge.context_chunks=8")
    assert three != eight
    rubric.write_text(rubric.read_text(encoding="utf-8") + "\n# a comment\n", encoding="utf-8")
    assert hash_of(*on, "judge.context_chunks=3") == three  # comments are not content
    content = yaml.safe_load(rubric.read_text(encoding="utf-8"))
    content["generator_prompt"] += " Answer in one sentence."
    rubric.write_text(yaml.safe_dump(content), encoding="utf-8")
    assert hash_of(*on, "judge.context_chunks=3") != three  # the rubric's content counts
