"""A run directory's files: ``config.yaml``, ``cases.jsonl``, ``cases_table.json``,
``chunks.jsonl``, ``report.md`` and the metrics plot. The run directory holds everything
MLflow gets, and more (the whole rankings, the chunk texts), so a run is inspectable without
MLflow (docs/tracking.md lists the files and what the store keeps of them).

Their size is bounded by the number of cases, not by the corpus: ``chunks.jsonl`` lists
only the chunks some case retrieved, at most cases × ``retrieval.top_k`` rows, and texts in
the per-case files are cut to a fixed length (:mod:`ragsweep.eval.case_table`)."""

from __future__ import annotations

import codecs
import functools
import hashlib
import json
import logging
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring as _json_string  # a str as JSON, non-ASCII kept
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ragsweep.cache.stage import StageCache
from ragsweep.chunk import table as chunk_table
from ragsweep.chunk import views as chunk_views
from ragsweep.chunk.chunkers import Chunk
from ragsweep.chunk.views import ChunkRows, chunk_ids
from ragsweep.config.schema import EvalConfig
from ragsweep.core import atomic, hashing, jsonline
from ragsweep.core.atomic import atomic_writer, write_bytes_atomic, write_text_atomic
from ragsweep.core.errors import CacheError
from ragsweep.core.hashing import sha256_json, sha256_text, source_digest
from ragsweep.core.jsonline import json_line
from ragsweep.core.names import CASES_FILE, CHUNKS_FILE, TABLE_FILE
from ragsweep.data.corpus import Corpus
from ragsweep.data.golden import GoldenCase
from ragsweep.data.parsers import PAGE_STARTS
from ragsweep.eval import measures
from ragsweep.eval.case_table import TableLayout, case_fields, case_table
from ragsweep.eval.scoring import CaseResult, Summary
from ragsweep.judge import JudgeOutcome
from ragsweep.run.report import plot_at_k, render_report

log = logging.getLogger(__name__)

CASES_STAGE = "case_files"
"""The stage cache's entries of a run's ``cases.jsonl`` and ``cases_table.json``, keyed by
the scored result they encode (:func:`cases_key`)."""

LINES_STAGE = "chunk_lines"
"""The stage cache's entries of ``chunks.jsonl`` files (:func:`write_chunks_file`)."""


@dataclass(frozen=True)
class StoredLines:
    """Where a run's ``chunks.jsonl`` is cached: in ``cache``, under the key of the chunk
    set (:attr:`~ragsweep.run.pipeline.BuiltIndex.chunk_set`) whose rows the chunks are."""

    cache: StageCache
    chunk_set: str


@dataclass(frozen=True)
class StoredCases:
    """Where a run's ``cases.jsonl`` and ``cases_table.json`` are cached: in ``cache``,
    under the key of the scored result they encode (:func:`ragsweep.run.scored.scores_key`;
    the entry's key adds the code that writes them, :func:`cases_key`)."""

    cache: StageCache
    scores_key: str


@dataclass(frozen=True)
class RunCases:
    """What the per-case files are made of: the golden ``cases`` of the evaluated split
    and their ``results`` (``results[i]`` is ``cases[i]``'s), the run's retrieved
    ``chunks`` (index order), the ``corpus`` the evidence text comes from and where the
    chunks' lines are cached (``lines``; None: they are written without the cache) and
    where the case files are (``stored``; None: they are written without the cache)."""

    cases: Sequence[GoldenCase]
    results: Sequence[CaseResult]
    chunks: Sequence[Chunk]
    corpus: Corpus
    lines: StoredLines | None = None
    stored: StoredCases | None = None


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
    """``cases.jsonl`` (each result with its :func:`~ragsweep.eval.case_table.case_fields` and
    ``extras[case id]``), ``cases_table.json`` (the same cases as an MLflow table) and
    ``chunks.jsonl`` (the retrieved chunks). Without ``extras`` (a judge's) and with
    ``run.stored``, the first two are copied from the stage cache (:data:`CASES_STAGE`) when
    a run wrote the same scored result's files before."""
    retrieved = retrieved_chunks(run.chunks, run.results)
    stored = run.stored
    if extras or stored is None or not stored.cache.enabled:
        _encode_case_files(output_dir, run, retrieved, eval_cfg, extras)
    else:
        _copy_case_files(output_dir, run, retrieved, eval_cfg, stored)
    write_chunks_file(output_dir / CHUNKS_FILE, retrieved, run.lines)


def _encode_case_files(
    folder: Path,
    run: RunCases,
    retrieved: Sequence[Chunk],
    eval_cfg: EvalConfig,
    extras: Mapping[str, Mapping[str, Any]],
) -> None:
    """Encode ``cases.jsonl`` and ``cases_table.json`` into ``folder``."""
    fields = [
        case_fields(case, result, run.corpus, text)
        for case, result, text in zip(
            run.cases, run.results, _top_texts(retrieved, run.results), strict=True
        )
    ]
    write_lines(
        folder / CASES_FILE,
        (
            json_line({**r.to_json(), **f, **extras.get(r.id, {})}, _finite(r, extras))
            for r, f in zip(run.results, fields, strict=True)
        ),
    )
    table = case_table(TableLayout(eval_cfg.ks, eval_cfg.budgets), fields, run.results)
    write_lines(folder / TABLE_FILE, [_JSON_LINE.encode(table) + "\n"])


def _copy_case_files(
    output_dir: Path,
    run: RunCases,
    retrieved: Sequence[Chunk],
    eval_cfg: EvalConfig,
    stored: StoredCases,
) -> None:
    """The case files from their :data:`CASES_STAGE` entry (encoded into it on a miss); a
    store failing now costs a warning, and the files are encoded here instead."""
    names = (CASES_FILE, TABLE_FILE)
    try:
        data = stored.cache.get_or_build(
            CASES_STAGE,
            cases_key(stored.scores_key, evidence_pages(run.cases, run.corpus)),
            lambda folder: _encode_case_files(folder, run, retrieved, eval_cfg, {}),
            lambda folder: [(folder / name).read_bytes() for name in names],
        )
    except (OSError, CacheError) as exc:  # the run is scored: a store failing loses no file
        log.warning("cache: %s not stored (%s); written without the cache", CASES_FILE, exc)
        _encode_case_files(output_dir, run, retrieved, eval_cfg, {})
        return
    for name, content in zip(names, data, strict=True):
        write_bytes_atomic(output_dir / name, content)


def cases_key(scores_key: str, pages: str) -> str:
    """Key of the case files of the scored result ``scores_key``: it, the page starts of the
    documents the cases cite (``pages``, :func:`evidence_pages`) and the code that encodes
    and writes them (this module, :mod:`ragsweep.eval.case_table` is in the scores key,
    :mod:`ragsweep.core.hashing` and :mod:`ragsweep.core.atomic`)."""
    return sha256_json({"scores": scores_key, "pages": pages, "writer": _writer_digest()})


def evidence_pages(cases: Sequence[GoldenCase], corpus: Corpus) -> str:
    """sha256 of the page starts (``metadata.page_starts``) of every document the ``cases``
    cite as evidence that has pages: what the ``page`` of an evidence span in
    ``cases.jsonl`` is read from (:func:`~ragsweep.eval.case_table.case_fields`), and what
    the corpus content hash in the scores key leaves out (a JSONL corpus's page starts
    edited, a PDF parser moving page breaks without changing the text). Only the cited
    documents are read: a few, however large the corpus."""
    cited = sorted({span.doc for case in cases for span in case.evidence})
    pages = {doc: corpus.get(doc).metadata.get(PAGE_STARTS) for doc in cited}
    return sha256_json({doc: starts for doc, starts in pages.items() if starts})


def _finite(result: CaseResult, extras: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether every float of ``result``'s ``cases.jsonl`` row is finite (its metrics, scores
    and latency; the case fields hold none), so :func:`~ragsweep.core.jsonline.json_line` may
    use orjson: a row with ``extras`` (a judge's) is not checked, so it is not."""
    total = result.seconds + sum(r.score for r in result.retrieved)
    return not extras and math.isfinite(total + sum((result.metrics or {}).values()))


def _top_texts(chunks: Sequence[Chunk], results: Sequence[CaseResult]) -> list[str | None]:
    """Each result's top chunk's text, from ``chunks`` (None when nothing was retrieved);
    only those chunks are read."""
    position = dict(zip(chunk_ids(chunks), range(len(chunks)), strict=True))
    return [
        chunks[position[result.retrieved[0].chunk_id]].text if result.retrieved else None
        for result in results
    ]


def retrieved_chunks(chunks: Sequence[Chunk], results: Sequence[CaseResult]) -> Sequence[Chunk]:
    """The chunks of ``chunks`` that some result retrieved, in ``chunks`` order: at most
    ``len(results)`` × the retrieval depth, however large the corpus. Read by id only:
    :class:`~ragsweep.chunk.views.ChunkRows` stay unbuilt."""
    wanted = {r.chunk_id for result in results for r in result.retrieved}
    ids = chunk_ids(chunks)
    keep = [i for i, chunk_id in enumerate(ids) if chunk_id in wanted]
    if len(keep) == len(ids):  # the usual case: the run's retrieved chunks
        return chunks
    if isinstance(chunks, ChunkRows):
        return chunks.subset(keep)
    return [chunks[i] for i in keep]


def write_chunks_file(path: Path, chunks: Sequence[Chunk], stored: StoredLines | None) -> None:
    """``chunks.jsonl``: one :func:`chunk_line` per chunk. With ``stored`` and chunks of a
    chunk table (:class:`~ragsweep.chunk.views.ChunkRows`), the file is copied from the
    stage cache (:data:`LINES_STAGE`) when a run wrote these chunks before: a warm run
    retrieves the same chunks, and encoding thousands of lines (~3 µs each) would be
    most of its file writing. Stored under :func:`lines_key`."""
    if stored is None or not stored.cache.enabled or not isinstance(chunks, ChunkRows):
        write_lines(path, map(chunk_line, chunks))
        return
    try:
        data = stored.cache.get_or_build(
            LINES_STAGE,
            lines_key(stored.chunk_set, chunks.rows),
            lambda folder: write_lines(folder / CHUNKS_FILE, map(chunk_line, chunks)),
            lambda folder: (folder / CHUNKS_FILE).read_bytes(),
        )
    except (OSError, CacheError) as exc:  # the run is scored: a store failing now loses no file
        log.warning("cache: %s not stored (%s); written without the cache", CHUNKS_FILE, exc)
        write_lines(path, map(chunk_line, chunks))
        return
    write_bytes_atomic(path, data)


def lines_key(chunk_set: str, rows: np.ndarray) -> str:
    """Key of the ``chunks.jsonl`` of the rows ``rows`` (ascending) of the chunk set
    ``chunk_set``: which chunks, and the code that builds and writes their lines (the
    source of this module, :mod:`ragsweep.core.hashing`, :mod:`ragsweep.chunk.table`,
    :mod:`ragsweep.chunk.views` and :mod:`ragsweep.core.atomic`)."""
    packed = np.ascontiguousarray(rows, dtype="<i8").tobytes()
    return sha256_json(
        {
            "chunk_set": chunk_set,
            "rows": hashlib.sha256(packed).hexdigest(),
            "writer": _writer_digest(),
        }
    )


@functools.cache
def _writer_digest() -> str:
    return source_digest(sys.modules[__name__], hashing, jsonline, chunk_table, chunk_views, atomic)


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
    """``lines`` of JSON (each ending in a newline) as a UTF-8 file, written like
    :func:`write_jsonl`; a lone surrogate (the corpus, golden and external-run readers
    refuse one, but a model server's JSON reply could hold one) is written as its JSON
    escape, so the file is UTF-8 and reads back the same value."""
    with atomic_writer(path, errors=_json_escape()) as handle:
        handle.writelines(lines)


def _escape_surrogates(error: UnicodeError) -> tuple[str, int]:
    """Codec error handler: the characters UTF-8 cannot encode (lone surrogates, which in
    our JSON are only ever inside strings) as ``\\uXXXX`` escapes."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    bad = error.object[error.start : error.end]
    return "".join(f"\\u{ord(char):04x}" for char in bad), error.end


@functools.cache
def _json_escape() -> str:
    """The name of :func:`_escape_surrogates`, registered on first use."""
    codecs.register_error(_JSON_ESCAPE, _escape_surrogates)
    return _JSON_ESCAPE


_JSON_ESCAPE = "ragsweep.json_escape"
