"""Stamping a golden file: record the digest of each evidence document of the cases that
have none yet, so that a later change of one of those documents is flagged.

``ragsweep label`` records ``metadata.doc_digests`` for every case it saves; a case written
by hand (or before the app existed) has none, so nothing can tell that its document changed
since its spans were chosen. :func:`stamp_cases` gives it the digests of its evidence
documents *as they are now*: run it once the cases are known to be right (``ragsweep
check`` passes), and from then on ``ragsweep label`` flags any stamped case whose document
changes. Only cases that load are stamped (their evidence resolves against the document
now); drafts, cases already stamped for every evidence document, cases whose
``metadata`` is not an object (``null`` counts as none) and lines with a problem are left
as they are and counted. Lines are rewritten in place in one atomic write, every
other line byte for byte, refused when the file changed on disk meanwhile
(:mod:`ragsweep.data.golden_file`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragsweep.config.schema import GoldenConfig
from ragsweep.core.errors import GoldenError
from ragsweep.core.names import STATUS_DRAFT
from ragsweep.data.corpus import Corpus
from ragsweep.data.golden import parse_case
from ragsweep.data.golden_file import (
    DIGESTS_KEY,
    evidence_digests,
    read_golden_file,
    replace_lines,
)
from ragsweep.data.golden_lines import Where

STAMPED = "stamped"
ALREADY = "already stamped"
PROBLEM = "with a problem (see ragsweep check)"
SKIPPED = "drafts or without evidence"
NOT_AN_OBJECT = "with a metadata value that is not an object (make it one to stamp them)"


def stamp_cases(corpus: Corpus, golden: GoldenConfig) -> Counter[str]:
    """Stamp the cases of ``golden.path`` (module docstring); what happened to each line."""
    path = Path(golden.path)
    current = read_golden_file(path)
    updates: dict[int, dict[str, Any]] = {}
    outcome: Counter[str] = Counter()
    for line in current.records():
        record = line.record
        where = Where(str(path), line.line)
        kind = _kind(record, corpus, where, golden.holdout_fraction)
        outcome[kind] += 1
        if kind == STAMPED:
            assert record is not None
            updates[line.line] = _stamped(record, corpus)
    if updates:
        replace_lines(path, current.digest, updates)
    return outcome


def _kind(
    record: dict[str, Any] | None, corpus: Corpus, where: Where, holdout_fraction: float
) -> str:
    if record is None:
        return PROBLEM
    if not isinstance(record.get("metadata") or {}, dict):  # null is no metadata
        return NOT_AN_OBJECT
    evidence = record.get("evidence")
    if record.get("status") == STATUS_DRAFT or not isinstance(evidence, list) or not evidence:
        return SKIPPED
    try:
        parse_case(record, where, holdout_fraction, corpus)
    except GoldenError:
        return PROBLEM
    if set(evidence_digests(corpus, evidence)) <= set(_digests(record)):
        return ALREADY
    return STAMPED


def _digests(record: Mapping[str, Any]) -> dict[str, Any]:
    digests = (record.get("metadata") or {}).get(DIGESTS_KEY)
    return digests if isinstance(digests, dict) else {}


def _stamped(record: Mapping[str, Any], corpus: Corpus) -> dict[str, Any]:
    """The record with the digests of its evidence documents that had none added."""
    digests = {**evidence_digests(corpus, record["evidence"]), **_digests(record)}
    metadata = {**(record.get("metadata") or {}), DIGESTS_KEY: digests}
    return {**record, "metadata": metadata}
