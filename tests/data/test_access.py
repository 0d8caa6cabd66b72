"""Document access metadata: JSONL fields, the folder sidecar, errors at file:line all at
once, and the corpus identity (a changed ACL is a new snapshot)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsweep.cache.stage import StageCache
from ragsweep.config.schema import CorpusConfig
from ragsweep.core.errors import CorpusError
from ragsweep.core.hashing import sha256_parts
from ragsweep.data.access import SIDECAR, Access
from ragsweep.data.corpus_cache import open_corpus
from tests.data.test_corpus import load, write_files, write_jsonl

PUBLIC = {"id": "a", "text": "open text"}
SECRET = {"id": "b", "text": "salary table", "acl": ["hr"], "version": "2"}
OLD = {"id": "c", "text": "old salary table", "acl": ["hr"], "superseded_by": "b"}
GONE = {"id": "d", "text": "withdrawn", "revoked": True, "meta": {"team": "x"}}


def test_jsonl_access_fields_are_read(tmp_path: Path) -> None:
    corpus = load(write_jsonl(tmp_path / "c.jsonl", PUBLIC, SECRET, OLD, GONE))
    assert corpus.get("a").access is None
    assert corpus.get("b").access == Access(acl=("hr",), version="2")
    assert corpus.get("c").access.superseded_by == "b"
    assert corpus.get("d").access == Access(revoked=True, meta={"team": "x"})
    assert set(corpus.access) == {"b", "c", "d"}
    assert not corpus.get("b").access.readable_by(None)
    assert corpus.get("b").access.readable_by(["staff", "hr"])


def test_access_is_part_of_the_corpus_identity(tmp_path: Path) -> None:
    plain = load(write_jsonl(tmp_path / "p.jsonl", PUBLIC, {"id": "b", "text": "salary table"}))
    with_acl = load(write_jsonl(tmp_path / "q.jsonl", PUBLIC, SECRET))
    other_acl = load(write_jsonl(tmp_path / "r.jsonl", PUBLIC, {**SECRET, "acl": ["finance"]}))
    hashes = {plain.content_hash(), with_acl.content_hash(), other_acl.content_hash()}
    assert len(hashes) == 3
    # a corpus without access metadata hashes as before it existed: (id, text) pairs only
    assert plain.content_hash() == sha256_parts(["a", "open text", "b", "salary table"])


def test_every_access_problem_is_reported_with_its_line(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "c.jsonl",
        PUBLIC,
        {"id": "b", "text": "x", "acl": "hr"},
        {"id": "c", "text": "x", "revoked": "yes"},
        {"id": "d", "text": "x", "superseded_by": "nowhere"},
        {"id": "e", "text": "x", "superseded_by": "e"},
    )
    with pytest.raises(CorpusError) as caught:
        load(path)
    message = str(caught.value)
    assert f"{path}:2: document 'b': 'acl' must be a list" in message
    assert f"{path}:3: document 'c': 'revoked' must be true or false" in message
    assert f"{path}:4: document 'd': 'superseded_by' names 'nowhere'" in message
    assert f"{path}:5: document 'e' is superseded by itself" in message


def test_folder_sidecar_gives_access_and_is_no_document(tmp_path: Path) -> None:
    root = write_files(tmp_path / "docs", {"a.md": "open", "hr/pay.md": "salary"})
    write_jsonl(root / SIDECAR, {"id": "hr/pay.md", "acl": ["hr"], "revoked": False})
    corpus = load(root, extensions=[".md", ".jsonl"])
    assert list(corpus.ids) == ["a.md", "hr/pay.md"]
    assert corpus.get("hr/pay.md").access == Access(acl=("hr",))
    assert corpus.get("a.md").access is None


def test_folder_sidecar_errors_name_file_and_line(tmp_path: Path) -> None:
    root = write_files(tmp_path / "docs", {"a.md": "open"})
    sidecar = write_jsonl(
        root / SIDECAR,
        {"id": "missing.md", "acl": ["hr"]},
        {"id": "a.md", "colour": "red"},
        {"id": "a.md", "superseded_by": "b.md"},
    )
    with pytest.raises(CorpusError) as caught:
        load(root)
    message = str(caught.value)
    assert f"{sidecar}:1: 'id' 'missing.md' names no document" in message
    assert f"{sidecar}:2: unknown field(s) ['colour']" in message
    assert f"{sidecar}:3: document 'a.md': 'superseded_by' names 'b.md'" in message


def test_lazy_corpus_keeps_access_and_identity(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", PUBLIC, SECRET, OLD, GONE)
    cfg = CorpusConfig(path=str(path))
    whole = load(path)
    open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)  # builds the entry
    lazy = open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    assert lazy.content_hash() == whole.content_hash()
    assert dict(lazy.access) == dict(whole.access)
