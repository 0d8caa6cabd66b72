"""A tiny project with document access metadata: a JSONL corpus with restricted, revoked
and superseded documents, and a golden set with principals and permission cases (issue 30).
Every document is one chunk at the default chunk size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import write_jsonl

DOCS: tuple[dict[str, Any], ...] = (
    {"id": "handbook", "text": "The canteen opens at noon. Staff parking is behind building B."},
    {"id": "pay", "text": "The bonus pool this year is two percent of salary.", "acl": ["hr"]},
    {
        "id": "pay-old",
        "text": "The bonus pool this year was one percent of salary.",
        "revoked": True,
    },
    {
        "id": "remote-v1",
        "text": "Remote work policy: two days a week from home.",
        "version": "1",
        "superseded_by": "remote-v2",
    },
    {"id": "remote-v2", "text": "Remote work policy: three days a week from home.", "version": "2"},
    {"id": "merger", "text": "The merger with Contoso closes in March.", "acl": ["exec"]},
)


def case(case_id: str, question: str, doc: str, quote: str, **fields: Any) -> dict[str, Any]:
    evidence = [{"doc": doc, "quote": quote}]
    return {"id": case_id, "question": question, "split": "tuning", "evidence": evidence, **fields}


CASES: tuple[dict[str, Any], ...] = (
    case("canteen", "When does the canteen open?", "handbook", "opens at noon"),
    case("bonus-hr", "How big is the bonus pool?", "pay", "two percent", principal=["hr"]),
    case("remote", "How many remote work days a week?", "remote-v2", "three days a week"),
    case("bonus-anyone", "How big is the bonus pool?", "pay", "two percent", type="permission"),
    case(
        "merger-hr",
        "When does the merger with Contoso close?",
        "merger",
        "closes in March",
        type="permission",
        principal=["hr"],
    ),
)


def write_access_project(root: Path) -> list[str]:
    """Write the corpus and golden set under ``root``; the Hydra overrides that use them."""
    root.mkdir(parents=True, exist_ok=True)
    corpus = write_jsonl(root / "corpus.jsonl", DOCS)
    golden = write_jsonl(root / "golden.jsonl", CASES)
    return [f"corpus.path={corpus}", f"golden.path={golden}", "embedding=bm25"]
