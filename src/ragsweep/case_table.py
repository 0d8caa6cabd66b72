"""What a reader needs to judge one case: its question, its expected evidence with the text,
where the first hit was, and what came first (``cases.jsonl`` fields and the MLflow table).

:func:`case_fields` gives the readable fields of a ``cases.jsonl`` row; :func:`case_table`
lays the same cases out as MLflow's table artifact (``cases_table.json``, in the format
``MlflowClient.log_table`` writes: ``{"columns": [...], "data": [[...], ...]}``), which the
MLflow UI shows as a table on the run's artifact page. Texts are cut to a fixed number of
characters (:data:`EVIDENCE_CHARS`, :data:`EXCERPT_CHARS`), so a row's size is bounded
whatever the corpus (docs/formats.md, "Run files").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragsweep.corpus import Corpus
from ragsweep.evaluate import CaseResult
from ragsweep.golden import GoldenCase
from ragsweep.measures import HIT, MRR, Measure

TABLE_FILE = "cases_table.json"
"""The MLflow table artifact at the run's artifact root (the UI's table view reads it)."""
EVIDENCE_CHARS = 200
"""Characters of each evidence span's text kept (longer spans end in ``…``)."""
EXCERPT_CHARS = 60
"""Characters of the top chunk's text kept (longer texts end in ``…``): about ten words,
enough to tell which passage came first, while the column stays about 60 bytes per case
(a SQuAD run's table is one of its largest artifacts; the whole text is in ``chunks.jsonl``)."""
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
    its ``doc``, ``start``, ``end`` and ``text`` (cut to :data:`EVIDENCE_CHARS`);
    ``first_hit_rank`` (:func:`first_hit_rank`); ``top_excerpt``, the text of the top
    chunk (``top_text``, the first entry of ``retrieved``) cut to :data:`EXCERPT_CHARS`,
    None when nothing was retrieved."""
    return {
        "question": case.question,
        "evidence": [
            {
                "doc": span.doc,
                "start": span.start,
                "end": span.end,
                "text": excerpt(corpus.get(span.doc).text[span.start : span.end], EVIDENCE_CHARS),
            }
            for span in case.evidence
        ],
        "first_hit_rank": first_hit_rank(result.metrics),
        "top_excerpt": None if top_text is None else excerpt(top_text, EXCERPT_CHARS),
    }


@dataclass(frozen=True)
class TableLayout:
    """The columns of the case table for a run's cut-offs ``ks`` and ``budgets``
    (characters). The ``hit_at_*`` cells are 1 (hit), 0 (miss) or None (unanswerable)."""

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
            "id",
            "type",
            "answerable",
            "question",
            "evidence",
            "evidence_text",
            "first_hit_rank",
            *self.hit_columns,
            "top_doc",
            "top_start",
            "top_end",
            "top_score",
            "top_excerpt",
        ]

    def row(self, fields: Mapping[str, Any], result: CaseResult) -> list[Any]:
        """One case's row; ``fields`` are its :func:`case_fields`."""
        evidence = fields["evidence"]
        metrics = result.metrics
        hits = [None if metrics is None else int(metrics[name]) for name in self.hit_columns]
        top = result.retrieved[0] if result.retrieved else None
        return [
            result.id,
            result.type,
            result.answerable,
            fields["question"],
            SEPARATOR.join(location(e["doc"], e["start"], e["end"]) for e in evidence),
            SEPARATOR.join(e["text"] for e in evidence),
            fields["first_hit_rank"],
            *hits,
            *((top.doc, top.start, top.end, top.score) if top else (None,) * 4),
            fields["top_excerpt"],
        ]


def case_table(
    layout: TableLayout, fields: Sequence[Mapping[str, Any]], results: Sequence[CaseResult]
) -> dict[str, Any]:
    """The ``cases_table.json`` content, ``{"columns": [...], "data": [[...], ...]}``: one
    row per case, in ``results`` order (``fields[i]``: the :func:`case_fields` of
    ``results[i]``)."""
    data = [layout.row(f, r) for f, r in zip(fields, results, strict=True)]
    return {"columns": layout.columns, "data": data}
