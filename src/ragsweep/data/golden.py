"""The golden question set: its model (cases labelled with evidence spans in the corpus)
and :func:`load_golden`, which makes one from a file.

A golden set is a JSONL file, one case per line (format: docs/formats.md). Evidence is a
character span ``[start, end)`` in a document's text (code points, 0-based, end-exclusive),
never a chunk id, so labels stay valid when the chunking changes. Evidence may be written
as a quote, which :func:`ragsweep.data.quotes.resolve_quote` turns into offsets.

:func:`load_golden` validates the whole file against the corpus before any index is built
(each line's fields: :mod:`ragsweep.data.golden_lines`); every problem is reported as
``<file>:<line>: case '<id>': ...`` (the id when it is known), all of them in one
:class:`GoldenError`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragsweep.config.schema import GoldenConfig
from ragsweep.core.errors import GoldenError, ProblemList
from ragsweep.core.names import ORIGIN_HAND, ORIGINS, PERMISSION_TYPE, SPLITS, STATUS_DRAFT
from ragsweep.data.corpus import Corpus
from ragsweep.data.golden_access import check_access, parse_principal
from ragsweep.data.golden_lines import (
    Where,
    check_unique_id,
    golden_lines,
    optional_bool,
    optional_text,
    parse_evidence,
    parse_scope,
    parse_split,
    read_record,
    reject_unknown_fields,
    required_text,
)

CASE_FIELDS = (
    "id",
    "question",
    "type",
    "answerable",
    "split",
    "evidence",
    "scope",
    "principal",
    "notes",
    "metadata",
    "origin",
    "status",
)
DEFAULT_TYPE = "untyped"


@dataclass(frozen=True)
class EvidenceSpan:
    """Characters ``[start, end)`` of document ``doc`` (code points into ``Document.text``)."""

    doc: str
    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end:
            raise ValueError(f"EvidenceSpan needs 0 <= start < end, got {self.start}, {self.end}")

    @property
    def length(self) -> int:
        """Span length in characters."""
        return self.end - self.start


@dataclass(frozen=True)
class GoldenCase:
    """One labelled question.

    ``evidence`` is empty exactly when the case is not answerable. ``scope`` lists the doc
    ids retrieval is restricted to for this case (None: the whole corpus). ``line`` is the
    1-based line of the case in the golden file. ``origin``: ``hand`` (written by a person)
    or ``drafted`` (drafted by a model, then accepted by a person: ``ragsweep label``).
    ``principal`` lists the groups of the
    person asking (None: nobody in particular, who may read only documents without an
    ``acl``); a case of type :data:`~ragsweep.core.names.PERMISSION_TYPE` has evidence only in
    documents its principal may not read and is scored as "nothing restricted retrieved"
    (:attr:`scored` is False).
    """

    id: str
    question: str
    type: str
    answerable: bool
    split: str
    evidence: tuple[EvidenceSpan, ...]
    scope: tuple[str, ...] | None
    line: int
    origin: str = ORIGIN_HAND
    principal: tuple[str, ...] | None = None

    @property
    def permission(self) -> bool:
        """Whether this is a permission case (class docstring)."""
        return self.type == PERMISSION_TYPE

    @property
    def scored(self) -> bool:
        """Whether retrieval measures (recall, ...) score it: answerable, not a permission
        case."""
        return self.answerable and not self.permission


@dataclass(frozen=True)
class GoldenSet:
    """All cases of a golden file in file order; ``digest`` is the sha256 of its bytes."""

    cases: tuple[GoldenCase, ...]
    path: str
    digest: str

    def for_split(self, split: str) -> tuple[GoldenCase, ...]:
        """The cases of ``split`` (``tuning`` or ``holdout``), in file order."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        return tuple(case for case in self.cases if case.split == split)

    @property
    def types(self) -> tuple[str, ...]:
        """The distinct question types, sorted."""
        return tuple(sorted({case.type for case in self.cases}))


def load_golden(cfg: GoldenConfig, corpus: Corpus) -> GoldenSet:
    """Read and validate the golden set at ``cfg.path`` against ``corpus``.

    Quotes are resolved to offsets, missing splits are assigned with
    :func:`~ragsweep.data.splits.assign_split`, and every case is checked; all problems are
    raised together as one GoldenError (the first
    :data:`~ragsweep.core.errors.MAX_REPORTED_PROBLEMS` listed, the rest counted).
    """
    path = Path(cfg.path)
    data = read_golden_bytes(path)
    digest = hashlib.sha256(data).hexdigest()
    memo_key = (str(path), digest, corpus.content_hash(), cfg.holdout_fraction)
    if memo_key not in _LOADED:
        _LOADED.clear()  # one golden set per process is the common case; keep memory flat
        _LOADED[memo_key] = _parse_golden(path, data, digest, cfg.holdout_fraction, corpus)
    return _LOADED[memo_key]


# A sweep evaluates many configurations of one golden set in one process: parse it once.
# The key holds the file's digest and the corpus hash, so an edited file or corpus is
# parsed (and validated) again.
_LOADED: dict[tuple[str, str, str, float], GoldenSet] = {}


def _parse_golden(
    path: Path, data: bytes, digest: str, holdout_fraction: float, corpus: Corpus
) -> GoldenSet:
    """The golden set in ``data`` (the file's bytes; ``digest``: their sha256).

    Every line is checked, whatever earlier lines hold: all problems are collected and
    raised together (:class:`~ragsweep.core.errors.ProblemList`), one per bad line.
    """
    problems = ProblemList(str(path), GoldenError)
    cases: list[GoldenCase] = []
    first_line: dict[str, int] = {}
    for line_no, line in enumerate(golden_lines(data), start=1):
        where = Where(str(path), line_no)
        try:
            record = read_record(line, where)
            if record is None or is_draft(record):
                continue
            check_unique_id(record, where, first_line)
            cases.append(parse_case(record, where, holdout_fraction, corpus))
        except GoldenError as exc:
            problems.add(str(exc))
    problems.raise_if_any()
    if not cases:
        raise GoldenError(f"{path}: golden set contains no cases")
    return GoldenSet(cases=tuple(cases), path=str(path), digest=digest)


def is_draft(record: Any) -> bool:
    """Whether a golden line is a draft nobody accepted yet (``"status": "draft"``): such a
    line is skipped by the loader and never scored (docs/golden.md, "Drafts")."""
    return isinstance(record, dict) and record.get("status") == STATUS_DRAFT


def read_golden_bytes(path: Path) -> bytes:
    """The bytes of the golden file ``path``; GoldenError when it is missing or unreadable."""
    if not path.is_file():
        reason = "is not a file" if path.exists() else "does not exist"
        raise GoldenError(f"{path}: golden set {reason} (golden.path)")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise GoldenError(f"{path}: cannot be read ({exc.strerror})") from None


def case_head(record: Any, where: Where) -> tuple[dict[str, Any], Where, str, str]:
    """The checks of a golden line that need no corpus (a JSON object of known fields with
    an id and a question): the record, ``where`` naming the case, its id and question."""
    if not isinstance(record, dict):
        raise where.error(f"expected a JSON object, got {type(record).__name__}")
    raw_id = record.get("id")
    if isinstance(raw_id, str) and raw_id.strip():
        where = Where(where.path, where.line, raw_id)
    reject_unknown_fields(record, CASE_FIELDS, "field", where)
    return (
        record,
        where,
        required_text(record, "id", where),
        required_text(record, "question", where),
    )


def parse_case(record: Any, where: Where, holdout_fraction: float, corpus: Corpus) -> GoldenCase:
    """The case of one golden line's JSON ``record``, every field checked against ``corpus``
    (GoldenError for the first problem, located by ``where``)."""
    record, where, case_id, question = case_head(record, where)
    case_type = optional_text(record, "type", DEFAULT_TYPE, where)
    answerable = optional_bool(record, "answerable", True, where)
    origin = optional_text(record, "origin", ORIGIN_HAND, where)
    if origin not in ORIGINS:
        raise where.error(f"'origin' must be one of {', '.join(ORIGINS)}, got {origin!r}")
    if "status" in record and record["status"] != STATUS_DRAFT:
        raise where.error(
            f"'status' may only be {STATUS_DRAFT!r} (a draft, not scored) or absent, "
            f"got {record['status']!r}"
        )
    split = parse_split(record, case_id, holdout_fraction, where)
    scope = parse_scope(record.get("scope"), where, corpus)
    evidence = parse_evidence(record.get("evidence", []), where, corpus, scope)
    if answerable and not evidence:
        raise where.error('"answerable": true needs at least one "evidence" item')
    if not answerable and evidence:
        raise where.error('"answerable": false must not carry "evidence"')
    principal = parse_principal(record.get("principal"), where, corpus)
    check_access(case_type, principal, [doc for doc, _, _ in evidence], where, corpus)
    return GoldenCase(
        id=case_id,
        question=question,
        type=case_type,
        answerable=answerable,
        split=split,
        evidence=tuple(EvidenceSpan(doc, start, end) for doc, start, end in evidence),
        scope=scope,
        line=where.line,
        origin=origin,
        principal=principal,
    )
