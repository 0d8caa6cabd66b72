"""Preprocessing: NFKC, cleanup, synonyms; identity recorded for drift checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsweep.config.schema import PreprocessConfig
from ragsweep.core.errors import ConfigError
from ragsweep.data.preprocess import build_preprocessor, cleanup, load_synonyms


def synonyms_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "synonyms.yaml"
    path.write_text(body, encoding="utf-8")
    return path


def test_none_is_identity() -> None:
    text = "  ＶＰＮ **bold**  \n\n ﾊﾟｽﾜｰﾄﾞ"
    assert build_preprocessor(PreprocessConfig(steps=()))(text) == text


def test_nfkc_folds_width_variants() -> None:
    prep = build_preprocessor(PreprocessConfig(steps=("nfkc",)))
    assert prep("ＶＰＮ ﾊﾟｽﾜｰﾄﾞ ＥＲＲ－４０３") == "VPN パスワード ERR-403"


def test_cleanup_drops_markdown_decoration_and_collapses_whitespace() -> None:
    text = "## Refunds\n\n**Note**: see `export`\n| a | b |\n---\n> quoted"
    assert cleanup(text) == "Refunds Note: see export a b quoted"


def test_synonyms_rewrite_variants_to_canonical(tmp_path: Path) -> None:
    path = synonyms_file(
        tmp_path, "groups:\n  - [サーバー, サーバ]\n  - [sign in, log in, login]\n"
    )
    prep = build_preprocessor(PreprocessConfig(steps=("nfkc", "synonyms"), synonyms_path=str(path)))
    assert prep("ｻｰﾊﾞに Log in する") == "サーバーに sign in する"
    assert prep("サーバー") == "サーバー"  # canonical form is left alone, not doubled
    assert prep("logins") == "logins"  # ASCII variants match whole words only
    assert prep.identity["synonyms_sha256"] is not None


def test_synonym_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_synonyms(tmp_path / "missing.yaml")
    bad = synonyms_file(tmp_path, "groups:\n  - [only-one]\n")
    with pytest.raises(ConfigError, match="group 1 must list at least two"):
        load_synonyms(bad)
    twice = synonyms_file(tmp_path, "groups:\n  - [a, b]\n  - [c, b]\n")
    with pytest.raises(ConfigError, match="'b' appears in groups 1 and 2"):
        load_synonyms(twice)


def test_identity_differs_between_step_lists(tmp_path: Path) -> None:
    raw = build_preprocessor(PreprocessConfig(steps=()))
    nfkc = build_preprocessor(PreprocessConfig(steps=("nfkc", "cleanup")))
    assert raw.key != nfkc.key
    assert nfkc.key == build_preprocessor(PreprocessConfig(steps=("nfkc", "cleanup"))).key
