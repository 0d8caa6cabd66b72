"""Corpus loading: directory and JSONL corpora, ids, encodings, errors and content hash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ragsweep.config.schema import CorpusConfig
from ragsweep.core.errors import ConfigError, CorpusError
from ragsweep.data.corpus import Corpus, load_corpus


def write_files(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        file = root / name
        file.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            file.write_bytes(content)
        else:
            file.write_bytes(content.encode("utf-8"))
    return root


def write_jsonl(path: Path, *lines: dict[str, Any] | str) -> Path:
    """Dicts become JSON lines (non-ASCII kept raw, as most exporters do); strings verbatim."""
    body = "\n".join(
        line if isinstance(line, str) else json.dumps(line, ensure_ascii=False) for line in lines
    )
    path.write_text(body + "\n", encoding="utf-8")
    return path


def load(path: Path, **kwargs: Any) -> Corpus:
    return load_corpus(CorpusConfig(path=str(path), **kwargs))


def corpus_error(path: Path) -> str:
    with pytest.raises(CorpusError) as info:
        load(path)
    return str(info.value)


# --- directory corpora ------------------------------------------------------------------


def test_directory_corpus_is_recursive_with_posix_relative_ids(tmp_path: Path) -> None:
    root = write_files(
        tmp_path / "docs",
        {
            "b.md": "# B\n",
            "a.txt": "plain a",
            "guides/vpn/setup.markdown": "VPN setup",
            "guides/README.MD": "upper-case suffix",
            "image.png": "not text",
            "data.json": "{}",
            "notes.md.bak": "backup",
            "guides/no_suffix": "no suffix",
        },
    )
    corpus = load(root)
    assert [d.id for d in corpus] == [
        "a.txt",
        "b.md",
        "guides/README.MD",
        "guides/vpn/setup.markdown",
    ]
    assert corpus.get("guides/vpn/setup.markdown").text == "VPN setup"
    assert corpus.source == str(root)


def test_directory_text_is_kept_exactly(tmp_path: Path) -> None:
    text = "Line one\r\nＶＰＮ ｶﾞｲﾄﾞ\r\n\ttabbed  \n\n"
    corpus = load(write_files(tmp_path, {"doc.md": text}))
    document = corpus.get("doc.md")
    assert document.text == text
    assert (document.title, dict(document.metadata)) == (None, {})


def test_directory_respects_configured_extensions(tmp_path: Path) -> None:
    root = write_files(tmp_path, {"a.md": "a", "b.rst": "b", "c.txt": "c"})
    assert [d.id for d in load(root, extensions=(".rst",))] == ["b.rst"]


def test_non_utf8_file_names_the_file(tmp_path: Path) -> None:
    root = write_files(tmp_path, {"ok.md": "fine", "sub/latin1.txt": "café".encode("latin-1")})
    message = corpus_error(root)
    assert str(root / "sub" / "latin1.txt") in message
    assert "not valid UTF-8" in message


def test_directory_without_matching_files_is_an_error(tmp_path: Path) -> None:
    root = write_files(tmp_path / "docs", {"image.png": "x", "data.csv": "a,b"})
    assert "no documents found" in corpus_error(root)
    (tmp_path / "empty").mkdir()
    assert "no documents found" in corpus_error(tmp_path / "empty")


# --- JSONL corpora ----------------------------------------------------------------------


def test_jsonl_corpus_reads_fields_and_sorts_by_id(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "docs.jsonl",
        {"id": "z/last", "text": "Zed text\n"},
        "",
        {"id": "a/first", "text": "ＶＰＮ guide", "title": "VPN", "metadata": {"lang": "ja"}},
        "   ",
    )
    corpus = load(path)
    assert [d.id for d in corpus] == ["a/first", "z/last"]
    first = corpus.get("a/first")
    assert (first.text, first.title, dict(first.metadata)) == (
        "ＶＰＮ guide",
        "VPN",
        {"lang": "ja"},
    )
    assert corpus.get("z/last").text == "Zed text\n"
    assert len(corpus) == 2
    assert corpus.n_chars == len("ＶＰＮ guide") + len("Zed text\n")
    assert "z/last" in corpus
    assert "missing" not in corpus


def test_jsonl_duplicate_ids_are_an_error(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "docs.jsonl",
        {"id": "a", "text": "one"},
        {"id": "b", "text": "two"},
        {"id": "a", "text": "three"},
    )
    message = corpus_error(path)
    assert str(path) in message
    assert "duplicate document id 'a'" in message


@pytest.mark.parametrize(
    ("bad_line", "expected"),
    [
        ('{"id": "b", "text": ', "invalid JSON"),
        ('["b", "text"]', "expected a JSON object, got list"),
        ('{"id": "b"}', "document 'b': 'text' must be a string"),
        ('{"id": "b", "text": null}', "document 'b': 'text' must be a string"),
        ('{"text": "no id"}', "'id' must be a non-empty string"),
        ('{"id": "", "text": "empty id"}', "'id' must be a non-empty string"),
        ('{"id": "b", "text": "t", "titel": "T"}', "unknown field(s) ['titel']"),
        ('{"id": "b", "text": "t", "title": 3}', "document 'b': 'title' must be a string"),
        ('{"id": "b", "text": "t", "metadata": "x"}', "document 'b': 'metadata' must be an object"),
        ('{"id": "b", "text": "x\\ud800y"}', "'text' holds a lone surrogate (\\ud800 at character"),
        ('{"id": "b\\uDFFF", "text": "t"}', "'id' holds a lone surrogate (\\udfff at character 2)"),
        ('{"id": "b", "text": "\\ude00\\ud83d"}', "'text' holds a lone surrogate (\\ude00 at"),
        (
            '{"id": "b", "text": "t", "metadata": {"src": ["ok", "\\udc00"]}}',
            "'metadata'.'src'[1] holds a lone surrogate (\\udc00 at character 1)",
        ),
        ('{"id": "b", "text": "t", "metadata": {"\\ud800": 1}}', "a key of 'metadata' holds"),
    ],
)
def test_bad_jsonl_line_names_file_and_line(tmp_path: Path, bad_line: str, expected: str) -> None:
    path = write_jsonl(tmp_path / "docs.jsonl", {"id": "a", "text": "ok"}, "", bad_line)
    message = corpus_error(path)
    assert message.startswith(f"{path}:3: ")
    assert expected in message


def test_escaped_pairs_and_escaped_backslashes_are_not_lone_surrogates(tmp_path: Path) -> None:
    """A pair of escapes is one character; ``\\\\ud800`` is a backslash and text."""
    path = write_jsonl(
        tmp_path / "docs.jsonl", '{"id": "a", "text": "\\ud83d\\ude00 and \\\\ud800"}'
    )
    (doc,) = load_corpus(CorpusConfig(path=str(path)))
    assert doc.text == "\U0001f600 and \\ud800"


def test_non_utf8_jsonl_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b'{"id": "a", "text": "caf\xe9"}\n')
    message = corpus_error(path)
    assert str(path) in message
    assert "not valid UTF-8" in message


def test_empty_jsonl_is_an_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "docs.jsonl", "", "  ")
    assert "no documents found" in corpus_error(path)


def test_jsonl_text_may_contain_unicode_line_separators(tmp_path: Path) -> None:
    text = "first\u2028second\x85third"
    path = write_jsonl(tmp_path / "docs.jsonl", {"id": "a", "text": text}, {"id": "b", "text": "x"})
    assert load(path).get("a").text == text


def test_jsonl_metadata_that_is_an_empty_list_is_an_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "docs.jsonl", {"id": "a", "text": "t", "metadata": []})
    assert "'metadata' must be an object" in corpus_error(path)


# --- paths ------------------------------------------------------------------------------


def test_missing_path_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    assert corpus_error(missing) == f"corpus.path={missing} does not exist"


def test_file_that_is_not_jsonl_is_an_error(tmp_path: Path) -> None:
    path = write_files(tmp_path, {"single.md": "text"}) / "single.md"
    assert "expected a directory or a .jsonl file" in corpus_error(path)


def test_empty_path_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"corpus\.path"):
        CorpusConfig(path="")


# --- content hash -----------------------------------------------------------------------


def jsonl_corpus(tmp_path: Path, name: str, *docs: dict[str, Any]) -> Corpus:
    return load(write_jsonl(tmp_path / f"{name}.jsonl", *docs))


def test_content_hash_changes_with_text_only(tmp_path: Path) -> None:
    base = jsonl_corpus(
        tmp_path, "base", {"id": "a", "text": "alpha", "title": "A"}, {"id": "b", "text": "beta"}
    )
    retitled = jsonl_corpus(
        tmp_path,
        "retitled",
        {"id": "a", "text": "alpha", "title": "Another title", "metadata": {"k": 1}},
        {"id": "b", "text": "beta"},
    )
    reordered = jsonl_corpus(
        tmp_path, "reordered", {"id": "b", "text": "beta"}, {"id": "a", "text": "alpha"}
    )
    edited = jsonl_corpus(
        tmp_path, "edited", {"id": "a", "text": "alpha!"}, {"id": "b", "text": "beta"}
    )
    renamed = jsonl_corpus(
        tmp_path, "renamed", {"id": "a2", "text": "alpha"}, {"id": "b", "text": "beta"}
    )
    assert len(base.content_hash()) == 64
    assert base.content_hash() == retitled.content_hash() == reordered.content_hash()
    assert edited.content_hash() != base.content_hash()
    assert renamed.content_hash() != base.content_hash()


def test_content_hash_does_not_depend_on_the_corpus_format(tmp_path: Path) -> None:
    root = write_files(tmp_path / "dir", {"a.md": "alpha", "sub/b.txt": "beta"})
    from_jsonl = jsonl_corpus(
        tmp_path, "same", {"id": "sub/b.txt", "text": "beta"}, {"id": "a.md", "text": "alpha"}
    )
    assert load(root).content_hash() == from_jsonl.content_hash()


def test_content_hash_separates_id_and_text_boundaries(tmp_path: Path) -> None:
    one = jsonl_corpus(tmp_path, "one", {"id": "ab", "text": "c"})
    other = jsonl_corpus(tmp_path, "other", {"id": "a", "text": "bc"})
    assert one.content_hash() != other.content_hash()


def test_hidden_folders_are_skipped(tmp_path: Path) -> None:
    (tmp_path / ".obsidian").mkdir()
    (tmp_path / ".obsidian" / "notes.md").write_text("hidden", encoding="utf-8")
    (tmp_path / "doc.md").write_text("visible", encoding="utf-8")
    assert [d.id for d in load(tmp_path)] == ["doc.md"]


def test_jsonl_with_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"id": "a", "text": "t"}\n')
    assert load(path).get("a").text == "t"
