"""Principals on golden cases and permission cases, checked against document access."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.core.errors import GoldenError
from ragsweep.data.corpus import Corpus, load_corpus
from ragsweep.data.golden import GoldenSet, load_golden
from tests.data.test_corpus import write_jsonl
from tests.data.test_golden import write_golden

DOCS = (
    {"id": "public", "text": "The canteen opens at noon."},
    {"id": "pay", "text": "The bonus pool is two percent.", "acl": ["hr"]},
    {"id": "old", "text": "The bonus pool was one percent.", "revoked": True},
)


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return load_corpus(CorpusConfig(path=str(write_jsonl(tmp_path / "c.jsonl", *DOCS))))


def load(tmp_path: Path, corpus: Corpus, *lines: dict[str, Any]) -> GoldenSet:
    return load_golden(GoldenConfig(path=str(write_golden(tmp_path, *lines))), corpus)


def ask(case_id: str, doc: str, quote: str, **fields: Any) -> dict[str, Any]:
    evidence = [{"doc": doc, "quote": quote}]
    return {"id": case_id, "question": "?", "evidence": evidence, **fields}


def test_principal_and_permission_cases_load(tmp_path: Path, corpus: Corpus) -> None:
    golden = load(
        tmp_path,
        corpus,
        ask("hr-asks", "pay", "two percent", principal=["hr"]),
        ask("leak", "pay", "two percent", principal=[], type="permission"),
        ask("anyone", "public", "noon"),
    )
    by_id = {c.id: c for c in golden.cases}
    assert by_id["hr-asks"].principal == ("hr",) and by_id["hr-asks"].scored
    assert by_id["leak"].permission and not by_id["leak"].scored
    assert by_id["anyone"].principal is None and by_id["anyone"].scored


def test_every_access_problem_of_the_golden_set_at_its_line(tmp_path: Path, corpus: Corpus) -> None:
    with pytest.raises(GoldenError) as caught:
        load(
            tmp_path,
            corpus,
            ask("a", "public", "noon", principal=["finance"]),
            ask("b", "pay", "two percent"),
            ask("c", "public", "noon", type="permission"),
            ask("d", "old", "one percent", principal=["hr"]),
            ask("e", "pay", "two", principal="hr"),
        )
    message = str(caught.value)
    assert ":1: case 'a': principal: unknown group(s) ['finance']" in message
    assert ":2: case 'b': evidence in document(s) ['pay'] the principal [] may not read" in message
    assert ":3: case 'c': a 'permission' case needs evidence only in documents" in message
    assert ":4: case 'd': evidence in revoked document(s) ['old']" in message
    assert ":5: case 'e': 'principal' must be a list of group names" in message
