"""What ``ragsweep label`` shows and writes: each case checked as ``ragsweep check`` checks
it, the counts and detectable differences of ``ragsweep-golden stats``, document search,
and a mouse selection turned into an evidence item.

A case's evidence is written as a quote (with ``occurrence`` when the quote occurs more than
once), so the line stays readable and survives edits elsewhere in the document; the digest
of each evidence document's text is kept in ``metadata.doc_digests``
(:mod:`ragsweep.data.golden_file`), so a span over a document that changed since it was
labelled (or stamped: ``ragsweep-golden stamp``) is flagged (docs/golden.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsweep.cli.golden import ALL_TYPES, slice_stats
from ragsweep.config.schema import GoldenConfig
from ragsweep.core.errors import GoldenError
from ragsweep.core.names import ORIGIN_DRAFTED, STATUS_DRAFT
from ragsweep.data.corpus import Corpus
from ragsweep.data.golden import GoldenCase, GoldenSet, parse_case
from ragsweep.data.golden_file import (
    DIGESTS_KEY,
    GoldenFile,
    GoldenLine,
    changed_documents,
    drafts_path,
    evidence_digests,
    evidence_item,
    read_golden_file,
)
from ragsweep.data.golden_lines import Where
from ragsweep.data.quotes import quote_matches
from ragsweep.eval.power import PowerAssumptions

SEARCH_HITS = 50
SNIPPET_CHARS = 60


@dataclass(frozen=True)
class LabelProject:
    """The corpus and the golden set ``ragsweep label`` works on, and the drafts file."""

    corpus: Corpus
    golden: GoldenConfig

    @property
    def golden_path(self) -> Path:
        return Path(self.golden.path)

    @property
    def drafts_path(self) -> Path:
        return drafts_path(self.golden_path)


def case_view(project: LabelProject, path: Path, line: GoldenLine) -> dict[str, Any]:
    """One line as the app shows it: its record, the loader's problem (if any), the
    resolved spans, quotes that need an occurrence, and documents changed since labelled."""
    record = line.record
    view: dict[str, Any] = {"line": line.line, "id": line.case_id, "record": record}
    if record is None:
        return {**view, "problem": f"{path}:{line.line}: not a JSON object", "spans": []}
    checked = {**record}
    checked.pop("status", None)  # a draft is checked as the case it would become
    try:
        case = parse_case(
            checked, Where(str(path), line.line), project.golden.holdout_fraction, project.corpus
        )
        view.update(problem=None, spans=_spans(case))
    except GoldenError as exc:
        view.update(problem=str(exc), spans=[])
    view["ambiguous"] = ambiguous_quotes(project.corpus, record.get("evidence"))
    view["changed"] = changed_documents(project.corpus, record)
    return view


def _spans(case: GoldenCase) -> list[dict[str, Any]]:
    return [{"doc": s.doc, "start": s.start, "end": s.end} for s in case.evidence]


def ambiguous_quotes(corpus: Corpus, evidence: Any) -> list[dict[str, Any]]:
    """Evidence quotes without ``occurrence`` that occur several times: the app asks which."""
    found = []
    for index, item in enumerate(evidence if isinstance(evidence, list) else []):
        if not isinstance(item, dict) or "occurrence" in item:
            continue
        doc, quote = item.get("doc"), item.get("quote")
        if not isinstance(doc, str) or doc not in corpus or not isinstance(quote, str):
            continue
        matches = quote_matches(corpus.get(doc).text, quote) if quote.strip() else []
        if len(matches) > 1:
            found.append({"index": index, "doc": doc, "matches": matches})
    return found


def file_view(project: LabelProject, current: GoldenFile) -> dict[str, Any]:
    """Every case of a file, its digest, and duplicate ids flagged."""
    views = [case_view(project, current.path, line) for line in current.records()]
    seen: dict[str, int] = {}
    for view in views:
        case_id = view["id"]
        if case_id in seen and view["problem"] is None:
            first = seen[case_id]
            view["problem"] = f"{current.path}:{view['line']}: duplicate id (first on line {first})"
        if case_id is not None:
            seen.setdefault(case_id, view["line"])
    return {"path": str(current.path), "digest": current.digest, "cases": views}


def state(project: LabelProject) -> dict[str, Any]:
    """Everything the app shows: the golden set, its stats, and the review queue."""
    golden = file_view(project, read_golden_file(project.golden_path))
    drafts = file_view(project, read_golden_file(project.drafts_path))
    return {
        "golden": golden,
        "drafts": drafts,
        "stats": stats_rows(project, golden["cases"]),
        "types": sorted(
            {
                str(c["record"].get("type"))
                for c in golden["cases"]
                if c["record"] and c["record"].get("type")
            }
        ),
    }


def stats_rows(project: LabelProject, views: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Counts per split and type and the detectable difference (``ragsweep-golden stats``),
    over the cases that pass every check and are not drafts."""
    cases = []
    for view in views:
        record = view["record"]
        if view["problem"] is None and record is not None and record.get("status") != STATUS_DRAFT:
            cases.append(
                parse_case(
                    record,
                    Where(str(project.golden_path), view["line"]),
                    project.golden.holdout_fraction,
                    project.corpus,
                )
            )
    golden = GoldenSet(tuple(cases), str(project.golden_path), "")
    assumptions = PowerAssumptions()
    rows = [
        {
            "split": r.split,
            "type": r.type,
            "answerable": r.answerable,
            "unanswerable": r.unanswerable,
            "detectable": r.detectable,
        }
        for r in slice_stats(golden, assumptions)
    ]
    drafted = sum(c.origin == ORIGIN_DRAFTED for c in cases)
    return {
        "rows": rows,
        "all_types": ALL_TYPES,
        "assumptions": assumptions.describe(),
        "checked": len(cases),
        "drafted": drafted,
    }


def labelled_record(
    corpus: Corpus, form: Mapping[str, Any], existing: Sequence[str]
) -> dict[str, Any]:
    """The golden record of the app's form: ``id`` (a new ``q-NNN`` when empty), question,
    type, split, answerable, evidence spans (as :func:`evidence_item`), and the digests of
    the evidence documents; ``origin`` and unknown fields of an edited record are kept."""
    base = {k: v for k, v in dict(form.get("keep") or {}).items() if k != "status"}
    case_id = str(form.get("id") or "").strip() or _new_id(existing)
    evidence = [
        evidence_item(corpus, str(s["doc"]), int(s["start"]), int(s["end"]))
        for s in form.get("spans") or []
    ]
    record: dict[str, Any] = {
        **base,
        "id": case_id,
        "question": str(form.get("question", "")).strip(),
    }
    for key in ("type", "split"):
        value = str(form.get(key) or "").strip()
        record.pop(key, None)
        if value:
            record[key] = value
    record["answerable"] = bool(form.get("answerable", True))
    record["evidence"] = evidence
    metadata = dict(record.get("metadata") or {})
    metadata[DIGESTS_KEY] = evidence_digests(corpus, evidence)
    if not evidence:
        metadata.pop(DIGESTS_KEY)
    record.pop("metadata", None)
    if metadata:
        record["metadata"] = metadata
    return record


def _new_id(existing: Sequence[str]) -> str:
    taken = set(existing)
    number = len(taken) + 1
    while f"q-{number:03d}" in taken:
        number += 1
    return f"q-{number:03d}"


def search(corpus: Corpus, query: str) -> list[dict[str, Any]]:
    """Documents whose id, title or text holds ``query`` (case-insensitive), each with its
    first hit's offset and a snippet; every document when the query is empty."""
    needle = query.lower().strip()
    hits = []
    for doc in corpus:
        entry = {"id": doc.id, "title": doc.title, "length": len(doc.text)}
        if not needle:
            hits.append(entry)
            continue
        position = doc.text.lower().find(needle)
        if position == -1 and needle not in f"{doc.id} {doc.title or ''}".lower():
            continue
        if position != -1:
            low = max(0, position - SNIPPET_CHARS)
            entry.update(
                offset=position, snippet=doc.text[low : position + len(needle) + SNIPPET_CHARS]
            )
        hits.append(entry)
        if len(hits) >= SEARCH_HITS:
            break
    return hits


def draft_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """An accepted draft as a golden case: ``status`` dropped, ``origin: drafted`` kept."""
    accepted = {k: v for k, v in record.items() if k != "status"}
    accepted["origin"] = ORIGIN_DRAFTED
    return accepted
