"""A run directory's files: ``config.yaml``, ``cases.jsonl``, ``chunks.jsonl``,
``report.md`` and the metrics plot. The run directory holds everything MLflow gets, so a
run is inspectable without MLflow (docs/tracking.md lists the files)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ragsweep import measures
from ragsweep.atomic import atomic_writer, write_text_atomic
from ragsweep.chunking import Chunk
from ragsweep.config import EvalConfig
from ragsweep.evaluate import CaseResult, Summary
from ragsweep.hashing import sha256_text
from ragsweep.judge import JudgeOutcome
from ragsweep.report import plot_at_k, render_report


def write_artifacts(
    output_dir: Path,
    resolved_config: Mapping[str, Any],
    results: Sequence[CaseResult],
    chunks: Sequence[Chunk],
    summary: Summary,
    eval_cfg: EvalConfig,
    facts: Mapping[str, object],
    judged: JudgeOutcome | None = None,
) -> None:
    """Write every file of a run into ``output_dir``.

    With ``judged``, each ``cases.jsonl`` row gets its ``judge`` record and ``report.md``
    a generation-and-judging section beside the retrieval metrics.
    """
    output_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(
        output_dir / "config.yaml",
        yaml.safe_dump(dict(resolved_config), sort_keys=False, allow_unicode=True),
    )
    extras = judged.case_fields() if judged else {}
    write_jsonl(
        output_dir / "cases.jsonl", ({**r.to_json(), **extras.get(r.id, {})} for r in results)
    )
    write_jsonl(output_dir / "chunks.jsonl", (manifest_row(c) for c in chunks))
    report = render_report(summary, eval_cfg, "ragsweep evaluation report", facts)
    if judged:
        report += "\n" + judged.report_section()
    meanings = measures.definitions(eval_cfg.ks, eval_cfg.budgets)
    definitions = "\n".join(f"- `{k}`: {v}" for k, v in meanings.items())
    write_text_atomic(
        output_dir / "report.md", report + "\n## Metric definitions\n\n" + definitions + "\n"
    )
    if summary.overall:
        plot_at_k(summary, eval_cfg.ks, output_dir / "metrics_at_k.svg", facts)


def manifest_row(chunk: Chunk) -> dict[str, Any]:
    """A ``chunks.jsonl`` row: the chunk's id, source span, text digest and heading path."""
    return {
        "chunk_id": chunk.id,
        "doc": chunk.doc,
        "start": chunk.start,
        "end": chunk.end,
        "text_sha256": sha256_text(chunk.text),
        "heading_path": list(chunk.heading_path),
    }


_JSON_LINE = json.JSONEncoder(ensure_ascii=False)  # one encoder: json.dumps builds one per call


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """One JSON object per line, UTF-8; written to a temporary file and renamed, so a full
    disk never leaves a truncated file under the real name."""
    with atomic_writer(path) as handle:
        handle.writelines(_JSON_LINE.encode(row) + "\n" for row in rows)
