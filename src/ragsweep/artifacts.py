"""A run directory's files: ``config.yaml``, ``cases.jsonl``, ``cases_table.json``,
``chunks.jsonl``, ``report.md`` and the metrics plot. The run directory holds everything
MLflow gets, and more (the whole rankings, the chunk texts), so a run is inspectable without
MLflow (docs/tracking.md lists the files and what the store keeps of them).

Their size is bounded by the number of cases, not by the corpus: ``chunks.jsonl`` lists
only the chunks some case retrieved, at most cases × ``retrieval.top_k`` rows, and texts in
the per-case files are cut to a fixed length (:mod:`ragsweep.case_table`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring as _json_string  # a str as JSON, non-ASCII kept
from pathlib import Path
from typing import Any

import yaml

from ragsweep import measures
from ragsweep.artifact_store import CHUNKS_FILE
from ragsweep.atomic import atomic_writer, write_text_atomic
from ragsweep.case_table import TABLE_FILE, TableLayout, case_fields, case_table
from ragsweep.chunking import Chunk
from ragsweep.config import EvalConfig
from ragsweep.corpus import Corpus
from ragsweep.evaluate import CASES_FILE, CaseResult, Summary
from ragsweep.golden import GoldenCase
from ragsweep.hashing import sha256_text
from ragsweep.judge import JudgeOutcome
from ragsweep.report import plot_at_k, render_report


@dataclass(frozen=True)
class RunCases:
    """What the per-case files are made of: the golden ``cases`` of the evaluated split
    and their ``results`` (``results[i]`` is ``cases[i]``'s), the run's ``chunks`` (index
    order) and the ``corpus`` the evidence text comes from."""

    cases: Sequence[GoldenCase]
    results: Sequence[CaseResult]
    chunks: Sequence[Chunk]
    corpus: Corpus


def write_artifacts(
    output_dir: Path,
    resolved_config: Mapping[str, Any],
    run: RunCases,
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
    write_case_files(output_dir, run, eval_cfg, judged.case_fields() if judged else {})
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


def write_case_files(
    output_dir: Path,
    run: RunCases,
    eval_cfg: EvalConfig,
    extras: Mapping[str, Mapping[str, Any]],
) -> None:
    """``cases.jsonl`` (each result with its :func:`~ragsweep.case_table.case_fields` and
    ``extras[case id]``), ``cases_table.json`` (the same cases as an MLflow table) and
    ``chunks.jsonl`` (the retrieved chunks)."""
    retrieved = retrieved_chunks(run.chunks, run.results)
    texts = {c.id: c.text for c in retrieved}
    fields = [
        case_fields(case, result, run.corpus, _top_text(result, texts))
        for case, result in zip(run.cases, run.results, strict=True)
    ]
    write_jsonl(
        output_dir / CASES_FILE,
        (
            {**r.to_json(), **f, **extras.get(r.id, {})}
            for r, f in zip(run.results, fields, strict=True)
        ),
    )
    table = case_table(TableLayout(eval_cfg.ks, eval_cfg.budgets), fields, run.results)
    write_text_atomic(output_dir / TABLE_FILE, _JSON_LINE.encode(table) + "\n")
    write_lines(output_dir / CHUNKS_FILE, (chunk_line(c) for c in retrieved))


def _top_text(result: CaseResult, texts: Mapping[str, str]) -> str | None:
    return texts[result.retrieved[0].chunk_id] if result.retrieved else None


def retrieved_chunks(chunks: Sequence[Chunk], results: Sequence[CaseResult]) -> list[Chunk]:
    """The chunks of ``chunks`` that some result retrieved, in ``chunks`` order: at most
    ``len(results)`` × the retrieval depth, however large the corpus."""
    wanted = {r.chunk_id for result in results for r in result.retrieved}
    return [c for c in chunks if c.id in wanted]


def chunk_row(chunk: Chunk) -> dict[str, Any]:
    """A ``chunks.jsonl`` row: the chunk's id, source span, text digest, heading path and
    text (the text as cut from the document, before preprocessing)."""
    return {
        "chunk_id": chunk.id,
        "doc": chunk.doc,
        "start": chunk.start,
        "end": chunk.end,
        "text_sha256": sha256_text(chunk.text),
        "heading_path": list(chunk.heading_path),
        "text": chunk.text,
    }


def chunk_line(chunk: Chunk) -> str:
    """:func:`chunk_row` as its ``chunks.jsonl`` line, the same characters as encoding
    that dict with :data:`_JSON_LINE`, formatted directly (a run writes one per distinct
    retrieved chunk, up to cases × depth; ~1.6x faster than building and encoding the
    dict; the heading path is joined from its encoded titles, as the encoder joins a
    list with these separators)."""
    return (
        f'{{"chunk_id":{_json_string(chunk.id)},"doc":{_json_string(chunk.doc)},'
        f'"start":{int(chunk.start)},"end":{int(chunk.end)},'
        f'"text_sha256":"{sha256_text(chunk.text)}",'
        f'"heading_path":[{",".join(map(_json_string, chunk.heading_path))}],'
        f'"text":{_json_string(chunk.text)}}}\n'
    )


# One encoder (json.dumps builds one per call); no spaces after separators: a SQuAD run's
# cases.jsonl has about 300,000 of them.
_JSON_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """One JSON object per line, UTF-8; written to a temporary file and renamed, so a full
    disk never leaves a truncated file under the real name."""
    write_lines(path, (_JSON_LINE.encode(row) + "\n" for row in rows))


def write_lines(path: Path, lines: Iterable[str]) -> None:
    """``lines`` (each ending in a newline) as a UTF-8 file, written like
    :func:`write_jsonl`."""
    with atomic_writer(path) as handle:
        handle.writelines(lines)
