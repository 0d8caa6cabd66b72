"""Who may read a document, and whether it may be retrieved at all (docs/formats.md,
"Document access").

A document may carry ``acl`` (the groups that may read it; absent: everyone), ``revoked``
(true: it must never be retrieved), ``version`` and ``superseded_by`` (the id of the
document that replaces it) and free ``meta`` for metadata filters. In a JSONL corpus these
are fields of the document's line; for a folder they are lines of one sidecar file,
:data:`SIDECAR`, at the folder's root. Every problem is reported with ``file:line``, all at
once. The access metadata is part of the corpus identity
(:meth:`ragsweep.data.corpus.Corpus.content_hash`): a changed ACL is a new corpus snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragsweep.core.errors import CorpusError, ProblemList

ACCESS_FIELDS = frozenset({"acl", "revoked", "version", "superseded_by", "meta"})
SIDECAR = "_access.jsonl"
"""The access file of a folder corpus: one JSON object a line, ``{"id": <document path>,
"acl": [...], "revoked": ..., ...}``; never read as a document."""


@dataclass(frozen=True)
class Access:
    """The access metadata of one document (module docstring)."""

    acl: tuple[str, ...] | None = None
    revoked: bool = False
    version: str | None = None
    superseded_by: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def readable_by(self, groups: Iterable[str] | None) -> bool:
        """Whether a principal of ``groups`` (None: nobody in particular) may read it."""
        return self.acl is None or bool(set(self.acl) & set(groups or ()))

    def to_json(self) -> dict[str, Any]:
        """The fields that differ from an unrestricted document's, as written in a file."""
        values = {
            "acl": list(self.acl) if self.acl is not None else None,
            "revoked": self.revoked or None,
            "version": self.version,
            "superseded_by": self.superseded_by,
            "meta": dict(self.meta) or None,
        }
        return {key: value for key, value in values.items() if value is not None}


def parse_access(record: Mapping[str, Any], where: str, doc_id: str) -> Access | None:
    """The access fields of one corpus (or sidecar) record; None when it has none.
    CorpusError naming ``where`` and the document for a malformed one."""
    if not ACCESS_FIELDS.intersection(record):
        return None
    prefix = f"{where}: document {doc_id!r}"
    acl = record.get("acl")
    if acl is not None and (
        not isinstance(acl, list) or not all(isinstance(g, str) and g for g in acl)
    ):
        raise CorpusError(f"{prefix}: 'acl' must be a list of group names, got {acl!r}")
    revoked = record.get("revoked", False)
    if not isinstance(revoked, bool):
        raise CorpusError(f"{prefix}: 'revoked' must be true or false, got {revoked!r}")
    for key in ("version", "superseded_by"):
        value = record.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise CorpusError(f"{prefix}: {key!r} must be a non-empty string, got {value!r}")
    meta = record.get("meta", {})
    if not isinstance(meta, dict):
        raise CorpusError(f"{prefix}: 'meta' must be an object, got {meta!r}")
    return Access(
        acl=tuple(dict.fromkeys(acl)) if acl is not None else None,
        revoked=revoked,
        version=record.get("version"),
        superseded_by=record.get("superseded_by"),
        meta=meta,
    )


def check_references(
    access: Mapping[str, Access],
    ids: Iterable[str],
    where: Mapping[str, str],
    problems: ProblemList,
) -> None:
    """Add a problem for every ``superseded_by`` that names no document of ``ids`` (or the
    document itself); ``where[doc_id]`` locates the document's access (``file:line``)."""
    known = set(ids)
    for doc_id, item in access.items():
        target = item.superseded_by
        if target is None:
            continue
        if target == doc_id:
            problems.add(f"{where[doc_id]}: document {doc_id!r} is superseded by itself")
        elif target not in known:
            problems.add(
                f"{where[doc_id]}: document {doc_id!r}: 'superseded_by' names {target!r}, "
                "which is no document of the corpus"
            )


def access_identity(access: Mapping[str, Access]) -> dict[str, Any]:
    """The part of a corpus's identity its access metadata makes: each restricted, revoked,
    versioned or annotated document's fields, by id (sorted)."""
    return {doc_id: access[doc_id].to_json() for doc_id in sorted(access)}


def known_groups(access: Iterable[Access]) -> frozenset[str]:
    """Every group some document's ``acl`` names."""
    return frozenset(group for item in access for group in (item.acl or ()))
