"""Helpers for the release tests (promotion, comparison, gate, nightly): the ``mini_project``
golden set with a holdout split worth scoring, and runs logged through the real pipeline to
the ``tracking_db`` store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragsweep.config.app import plain_config
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import RunResult, run_evaluation

# One holdout case BM25 finds (shared words) and one it cannot (no shared token at all).
EXTRA_HOLDOUT: list[dict[str, Any]] = [
    {
        "id": "q6",
        "question": "How do I export my notes as a ZIP archive?",
        "type": "procedural",
        "split": "holdout",
        "evidence": [{"doc": "billing.md", "quote": "export all notes as a ZIP archive"}],
    },
    {
        "id": "q7",
        "question": "unicorn pony",
        "type": "factual",
        "split": "holdout",
        "evidence": [{"doc": "billing.md", "quote": "original payment method"}],
    },
]


def add_holdout_cases(project: Path) -> Path:
    """Append :data:`EXTRA_HOLDOUT` to the project's golden set; return the project."""
    golden = project / "golden.jsonl"
    with golden.open("a", encoding="utf-8") as handle:
        for row in EXTRA_HOLDOUT:
            handle.write(json.dumps(row) + "\n")
    return project


def store_uri(project: Path) -> str:
    """The MLflow store ``compose_config`` logs to for this project (``tracking_db``)."""
    return f"sqlite:///{project / 'outputs' / 'mlflow.db'}"


def evaluate(compose_config: Any, project: Path, name: str, *extra: str) -> RunResult:
    """Evaluate the project with the real pipeline into ``project/runs/<name>`` and log it."""
    cfg = compose_config(
        f"corpus.path={project / 'corpus'}",
        f"golden.path={project / 'golden.jsonl'}",
        "chunking.size=120",
        "chunking.overlap=20",
        *extra,
    )
    resolved = plain_config(cfg)
    return run_evaluation(resolve(resolved), project / "runs" / name)
