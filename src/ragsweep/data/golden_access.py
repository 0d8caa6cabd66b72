"""A golden case's ``principal`` and the checks it meets against the corpus's access
metadata (docs/formats.md, "Principals and permission cases").

A case's evidence must be readable by its principal and in no revoked document, except in a
permission case (type :data:`~ragsweep.core.names.PERMISSION_TYPE`), whose evidence must all
be in documents its principal may *not* read: it asks what the principal must not be told.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsweep.core.names import PERMISSION_TYPE
from ragsweep.data.corpus import Corpus
from ragsweep.data.golden_lines import Where


def parse_principal(value: Any, where: Where, corpus: Corpus) -> tuple[str, ...] | None:
    """The groups of a ``principal`` field (None when absent); every group must be one some
    document's ``acl`` names."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(g, str) and g for g in value):
        raise where.error(f"'principal' must be a list of group names, got {value!r}")
    unknown = sorted(set(value) - corpus.groups)
    if unknown:
        known = ", ".join(sorted(corpus.groups)) or "none: no document has an acl"
        raise where.error(
            f"principal: unknown group(s) {unknown} (the corpus's acl groups: {known})"
        )
    return tuple(dict.fromkeys(value))


def check_access(
    case_type: str,
    principal: tuple[str, ...] | None,
    evidence_docs: Sequence[str],
    where: Where,
    corpus: Corpus,
) -> None:
    """GoldenError when the case's evidence does not fit its principal (module docstring)."""
    access = corpus.access
    if not access:
        if case_type == PERMISSION_TYPE:
            raise where.error("a permission case needs a corpus with 'acl' on documents")
        return
    docs = list(dict.fromkeys(evidence_docs))
    revoked = [d for d in docs if d in access and access[d].revoked]
    if revoked:
        raise where.error(f"evidence in revoked document(s) {revoked}, which are never retrieved")
    readable = [d for d in docs if d not in access or access[d].readable_by(principal)]
    if case_type != PERMISSION_TYPE:
        hidden = [d for d in docs if d not in readable]
        if hidden:
            raise where.error(
                f"evidence in document(s) {hidden} the principal {list(principal or [])} may "
                f"not read; give the case a principal that may, or type {PERMISSION_TYPE!r}"
            )
        return
    if not docs or readable:
        raise where.error(
            f"a {PERMISSION_TYPE!r} case needs evidence only in documents its principal may "
            f"not read; readable: {readable or 'no evidence given'}"
        )
