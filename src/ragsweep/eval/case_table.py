"""What a reader needs to judge one case: its question, its expected evidence with the text,
where the first hit was, and what came first (``cases.jsonl`` fields and the MLflow table).

:func:`case_fields` gives the readable fields of a ``cases.jsonl`` row; :func:`case_table`
lays the same cases out as MLflow's table artifact (``cases_table.json``, in the format
``MlflowClient.log_table`` writes: ``{"columns": [...], "data": [[...], ...]}``), which the
MLflow UI shows as a table on the run's artifact page. Texts are cut to a fixed number of
characters (:data:`EVIDENCE_CHARS`, :data:`EXCERPT_CHARS`, and shorter in the table), so a
row's size is bounded whatever the corpus (docs/formats.md, "Run files").

In the tracking store each per-case value is kept once: the table, and beside it
``cases.jsonl.gz`` with what the table does not show (:func:`stored_case_row`);
:func:`rebuilt_case_row` joins the two back into a ``cases.jsonl`` row for readers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragsweep.data.corpus import Corpus, Document
from ragsweep.data.golden import GoldenCase
from ragsweep.data.parsers import PAGE_STARTS, page_of
from ragsweep.eval.measures import HIT, MRR, Measure
from ragsweep.eval.scoring import CaseResult

EVIDENCE_CHARS = 200
"""Characters of each evidence span's text kept (longer spans end in ``…``)."""
EXCERPT_CHARS = 60
"""Characters of the top chunk's text kept in ``cases.jsonl`` (longer texts end in ``…``):
about ten words, enough to tell which passage came first (the whole text is in
``chunks.jsonl``)."""
QUESTION_CHARS = 150
"""Characters of the question the table keeps (SQuAD's longest is 164)."""
TABLE_EVIDENCE_CHARS = 100
"""Characters of the evidence text (all spans, joined) the table keeps."""
EVIDENCE_SPANS_SHOWN = 2
"""Evidence locations the table lists; more are counted (``+3 more``)."""
TABLE_EXCERPT_CHARS = 30
"""Characters of the top chunk's text the table keeps: five or six words, which tell the
passages apart; the column is about a sixth of a SQuAD run's table."""
SCORE_DECIMALS = 3
"""Decimals of the top chunk's score in the table (what ``ragsweep-compare`` prints)."""
ROW_CHAR_BOUND = 450
"""At most this many characters per table row beside its document ids and type name (JSON,
no spaces): question 150, evidence text 100, excerpt 30 (each with its quotes), two evidence
locations and the top chunk's as ``doc@start-end`` (offsets of up to ten digits) with
``; +n more``, a rank, a score, 2 per hit cell (up to ten cut-offs) and the punctuation;
docs/tracking.md, "Artifact budget"."""
ELLIPSIS = "…"
SEPARATOR = "; "
"""Between the spans of a case with several, in the table's ``evidence`` columns."""


def excerpt(text: str, limit: int) -> str:
    """``text`` with each run of whitespace folded to one space, cut to ``limit``
    characters (the last one ``…`` when it was cut)."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1] + ELLIPSIS


def location(doc: str, start: int, end: int) -> str:
    """``doc@start-end``: a span written the way chunk ids are."""
    return f"{doc}@{start}-{end}"


def first_hit_rank(metrics: Mapping[str, float] | None) -> int | None:
    """The 1-based rank of the first retrieved chunk that hits an evidence span, read from
    the case's reciprocal rank (``mrr``); None when no retrieved chunk hits, and for an
    unanswerable case."""
    reciprocal = (metrics or {}).get(Measure(MRR).name, 0.0)
    return round(1 / reciprocal) if reciprocal > 0 else None


def case_fields(
    case: GoldenCase, result: CaseResult, corpus: Corpus, top_text: str | None
) -> dict[str, Any]:
    """The readable fields of a ``cases.jsonl`` row: ``question``; ``evidence``, per span
    its ``doc``, ``start``, ``end``, ``text`` (cut to :data:`EVIDENCE_CHARS`) and, in a
    document with pages (a PDF), the 1-based ``page`` its start lies on;
    ``first_hit_rank`` (:func:`first_hit_rank`); ``top_excerpt``, the text of the top
    chunk (``top_text``, the first entry of ``retrieved``) cut to :data:`EXCERPT_CHARS`,
    None when nothing was retrieved."""
    return {
        "question": case.question,
        "evidence": [
            _evidence_entry(corpus.get(span.doc), span.start, span.end) for span in case.evidence
        ],
        "first_hit_rank": first_hit_rank(result.metrics),
        "top_excerpt": None if top_text is None else excerpt(top_text, EXCERPT_CHARS),
    }


def _evidence_entry(doc: Document, start: int, end: int) -> dict[str, Any]:
    """One evidence span of :func:`case_fields`, with its ``page`` when ``doc`` has pages."""
    entry: dict[str, Any] = {
        "doc": doc.id,
        "start": start,
        "end": end,
        "text": excerpt(doc.text[start:end], EVIDENCE_CHARS),
    }
    page_starts = doc.metadata.get(PAGE_STARTS)
    if page_starts:
        entry["page"] = page_of(page_starts, start)
    return entry


def evidence_location(entry: Mapping[str, Any]) -> str:
    """``doc@start-end``, with `` p.N`` when the span's page is known."""
    page = f" p.{entry['page']}" if "page" in entry else ""
    return location(entry["doc"], entry["start"], entry["end"]) + page


@dataclass(frozen=True)
class TableLayout:
    """The columns of the case table for a run's cut-offs ``ks`` and ``budgets``
    (characters). Every cell is bounded (:data:`ROW_CHAR_BOUND`): texts are cut, numbers
    rounded, and only the top chunk of the ranking is shown. The ``hit_at_*`` cells are 1
    (hit) or 0; an unanswerable case (``answerable`` false) has no evidence to hit, so its
    cells are 0 and it is scored by no metric. Rows are in the order of the run's
    ``cases.jsonl``; the case ids are there, not here (:func:`stored_case_row`). The question
    comes first: MLflow's evaluation view lists one row per value of the first column."""

    ks: tuple[int, ...]
    budgets: tuple[int, ...]

    @property
    def hit_columns(self) -> list[str]:
        """``hit_at_<k>`` for each k, then ``hit_at_<B>c`` for each budget."""
        return [Measure(HIT, k=k).name for k in self.ks] + [
            Measure(HIT, budget=b).name for b in self.budgets
        ]

    @property
    def columns(self) -> list[str]:
        """Every column, in table order."""
        return [
            "question",
            "type",
            "answerable",
            "evidence",
            "evidence_text",
            "first_hit_rank",
            *self.hit_columns,
            "top_chunk",
            "top_score",
            "top_excerpt",
        ]

    def row(self, fields: Mapping[str, Any], result: CaseResult) -> list[Any]:
        """One case's row; ``fields`` are its :func:`case_fields`."""
        evidence, top_excerpt = fields["evidence"], fields["top_excerpt"]
        metrics = result.metrics or {}
        hits = [int(metrics.get(name, 0.0)) for name in self.hit_columns]
        top = result.retrieved[0] if result.retrieved else None
        shown = evidence[:EVIDENCE_SPANS_SHOWN]
        more = [f"+{len(evidence) - len(shown)} more"] if len(evidence) > len(shown) else []
        return [
            excerpt(fields["question"], QUESTION_CHARS),
            result.type,
            result.answerable,
            SEPARATOR.join([*(evidence_location(e) for e in shown), *more]),
            excerpt(SEPARATOR.join(e["text"] for e in evidence), TABLE_EVIDENCE_CHARS),
            fields["first_hit_rank"],
            *hits,
            None if top is None else location(top.doc, top.start, top.end),
            None if top is None else round(top.score, SCORE_DECIMALS),
            None if top_excerpt is None else excerpt(top_excerpt, TABLE_EXCERPT_CHARS),
        ]


def case_table(
    layout: TableLayout, fields: Sequence[Mapping[str, Any]], results: Sequence[CaseResult]
) -> dict[str, Any]:
    """The ``cases_table.json`` content, ``{"columns": [...], "data": [[...], ...]}``: one
    row per case, in ``results`` order (``fields[i]``: the :func:`case_fields` of
    ``results[i]``)."""
    data = [layout.row(f, r) for f, r in zip(fields, results, strict=True)]
    return {"columns": layout.columns, "data": data}


# What the store keeps of a ``cases.jsonl`` row beside the table. A logged run stores each
# per-case value once: what the table shows (type, answerable, question, evidence, first
# hit, the top chunk) is read back from ``cases_table.json``; ``cases.jsonl.gz`` holds the
# rest (id, split, latency, every per-case metric, the judge's record). The ranks below
# the first stay in the run directory's ``cases.jsonl``.
SHOWN_FIELDS = frozenset(
    {"type", "answerable", "question", "evidence", "first_hit_rank", "top_excerpt", "retrieved"}
)
"""``cases.jsonl`` fields the stored row leaves to the table."""
TOP_CHUNK_ID = "top_chunk_id"
"""Stored-row field: the top chunk's id, only when it is not its location (``doc@start-end``,
what the table shows; chunk ids of an external index may differ)."""


def stored_case_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``cases.jsonl.gz`` row of a run-directory ``cases.jsonl`` row."""
    stored = {k: v for k, v in row.items() if k not in SHOWN_FIELDS}
    retrieved = row["retrieved"]
    if retrieved["chunk_id"]:
        top = location(retrieved["doc"][0], retrieved["start"][0], retrieved["end"][0])
        if retrieved["chunk_id"][0] != top:
            stored[TOP_CHUNK_ID] = retrieved["chunk_id"][0]
    return stored


def is_stored_row(row: Mapping[str, Any]) -> bool:
    """Whether a stored ``cases.jsonl`` row is a :func:`stored_case_row` (runs logged
    before kept whole rows, ``retrieved`` included)."""
    return "retrieved" not in row


def rebuilt_case_row(stored: Mapping[str, Any], table_row: Mapping[str, Any]) -> dict[str, Any]:
    """A ``cases.jsonl`` row from its stored row and its table row (column → cell): every
    field a reader of logged cases uses (:meth:`ragsweep.eval.scoring.CaseResult.from_json`),
    with ``retrieved`` holding the top chunk only and its score rounded as the table shows
    it (:data:`SCORE_DECIMALS`)."""
    top = table_row["top_chunk"]
    retrieved: dict[str, list[Any]] = {
        "chunk_id": [],
        "doc": [],
        "start": [],
        "end": [],
        "score": [],
    }
    if top is not None:
        doc, start, end = parse_location(top)
        for name, value in (
            ("chunk_id", stored.get(TOP_CHUNK_ID, top)),
            ("doc", doc),
            ("start", start),
            ("end", end),
            ("score", table_row["top_score"]),
        ):
            retrieved[name].append(value)
    rest = {k: v for k, v in stored.items() if k != TOP_CHUNK_ID}
    return {
        **rest,
        "type": table_row["type"],
        "answerable": table_row["answerable"],
        "question": table_row["question"],
        "first_hit_rank": table_row["first_hit_rank"],
        "top_excerpt": table_row["top_excerpt"],
        "retrieved": retrieved,
    }


def parse_location(text: str) -> tuple[str, int, int]:
    """Inverse of :func:`location` (a document id may itself contain ``@``)."""
    doc, _, span = text.rpartition("@")
    start, _, end = span.partition("-")
    return doc, int(start), int(end)
