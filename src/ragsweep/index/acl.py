"""Retrieval that respects document access (docs/retrieval.md, "Document access").

``retrieval.acl`` chooses how a case's principal is enforced: ``pre`` ranks only the chunks
of documents the principal may read (the case's chunk mask, like a scope), ``post`` ranks
every chunk, drops the ones it may not read and searches deeper until the depth is full or
the index has no more, ``off`` filters nothing (revoked documents are eligible too), to
measure what an unfiltered stack would leak. ``retrieval.latest_only`` leaves out documents
another one supersedes, in every mode (before ranking under ``off``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ragsweep.config.schema import RetrievalConfig
from ragsweep.core.names import ACL_OFF, ACL_POST, ACL_PRE
from ragsweep.core.registry import Registry
from ragsweep.data.access import Access
from ragsweep.data.golden import GoldenCase
from ragsweep.index.base import Query, Ranked, ScopeMask

Search = Callable[[Sequence[Query], int], list[Ranked]]
"""Rank queries at a depth (the index's search)."""
Strategy = Callable[
    ["AccessFilter", Search, Sequence[Query], Sequence[GoldenCase], int], list[Ranked]
]

STRATEGIES: Registry[Strategy] = Registry("retrieval.acl")


def principal_key(principal: Sequence[str] | None) -> tuple[str, ...]:
    """A principal as a key: its groups, sorted."""
    return tuple(sorted(principal or ()))


@dataclass(frozen=True)
class AccessFilter:
    """What a run's cases may retrieve: ``access`` (the corpus's metadata), the retrieval
    settings, ``masker`` (documents → chunk mask of the run's chunks) and ``n_chunks``."""

    access: Mapping[str, Access]
    cfg: RetrievalConfig
    masker: ScopeMask
    n_chunks: int
    _excluded: dict[tuple[str, ...], list[str]] = field(default_factory=dict, compare=False)
    _masks: dict[tuple[str, ...], np.ndarray | None] = field(default_factory=dict, compare=False)
    _narrowed: dict[tuple[int, tuple[str, ...]], tuple[np.ndarray | None, np.ndarray]] = field(
        default_factory=dict, compare=False
    )
    """Per (identity of a query's mask, principal): that mask, kept so its identity is not
    reused, and the narrowed mask, shared by the queries of that pair."""

    @property
    def active(self) -> bool:
        """Whether any document can be left out for any case."""
        return bool(self.access) and (self.cfg.acl != ACL_OFF or self.cfg.latest_only)

    def excluded(self, principal: Sequence[str] | None) -> list[str]:
        """The documents a case of ``principal`` may not retrieve, sorted (memoized per
        principal: cases share a few)."""
        key = principal_key(principal)
        if key not in self._excluded:
            self._excluded[key] = self._barred(key)
        return self._excluded[key]

    def _barred(self, principal: Sequence[str]) -> list[str]:
        enforce = self.cfg.acl != ACL_OFF
        return sorted(
            doc
            for doc, item in self.access.items()
            if (enforce and (item.revoked or not item.readable_by(principal)))
            or (self.cfg.latest_only and item.superseded_by is not None)
        )

    def scope_key(self, scope_key: str | None, case: GoldenCase) -> str | None:
        """A case's part of the rankings key (:func:`ragsweep.index.stages.rankings_key`):
        its scope's, and its principal when access is enforced (the access metadata itself
        is part of the corpus hash, hence of the index key)."""
        if not self.active:
            return scope_key
        return f"{scope_key}|principal:{','.join(sorted(case.principal or ()))}"

    def excluded_mask(self, case: GoldenCase) -> np.ndarray | None:
        """The chunks ``case`` may not retrieve (None: none), one mask per principal."""
        key = principal_key(case.principal)
        if key not in self._masks:
            excluded = self.excluded(case.principal)
            self._masks[key] = self.masker(excluded) if excluded else None
        return self._masks[key]

    def narrowed(self, query: Query, case: GoldenCase) -> Query:
        """``query`` with its mask narrowed to what ``case`` may retrieve; queries of one
        mask and one principal share the narrowed mask (the rankings key digests each mask
        object once)."""
        excluded = self.excluded_mask(case)
        if excluded is None:
            return query
        key = (id(query.allowed), principal_key(case.principal))
        if key not in self._narrowed:
            allowed = ~excluded if query.allowed is None else query.allowed & ~excluded
            self._narrowed[key] = (query.allowed, allowed)
        return replace(query, allowed=self._narrowed[key][1])

    def search(
        self, search: Search, queries: Sequence[Query], cases: Sequence[GoldenCase], depth: int
    ) -> list[Ranked]:
        """Rank ``queries`` (``queries[i]`` asks ``cases[i]``) at ``depth`` under the
        configured mode."""
        if not self.active:
            return search(queries, depth)
        mode = self.cfg.acl if self.cfg.acl != ACL_OFF else ACL_PRE
        return STRATEGIES.get(mode)(self, search, queries, cases, depth)


@STRATEGIES.register(ACL_PRE)
def _before_ranking(
    flt: AccessFilter,
    search: Search,
    queries: Sequence[Query],
    cases: Sequence[GoldenCase],
    depth: int,
) -> list[Ranked]:
    """Each query's chunk mask narrowed to what its case may retrieve."""
    return search([flt.narrowed(q, c) for q, c in zip(queries, cases, strict=True)], depth)


@STRATEGIES.register(ACL_POST)
def _after_ranking(
    flt: AccessFilter,
    search: Search,
    queries: Sequence[Query],
    cases: Sequence[GoldenCase],
    depth: int,
) -> list[Ranked]:
    """Rank everything, drop what a case may not retrieve, and search twice as deep for the
    cases left short until they are full or their ranking holds every chunk it can."""
    masks = [flt.excluded_mask(c) for c in cases]
    done: dict[int, Ranked] = {}
    pending, searched = list(range(len(queries))), depth
    while pending:
        ranked = search([queries[i] for i in pending], searched)
        short = []
        for i, ranking in zip(pending, ranked, strict=True):
            kept = _kept(ranking, masks[i], depth)
            exhausted = len(ranking.indices) < searched or searched >= flt.n_chunks
            if len(kept.indices) < depth and not exhausted:
                short.append(i)
            else:
                done[i] = kept
        pending, searched = short, min(2 * searched, flt.n_chunks)
    return [done[i] for i in range(len(queries))]


def _kept(ranking: Ranked, excluded: np.ndarray | None, depth: int) -> Ranked:
    if excluded is None:
        return replace(ranking, indices=ranking.indices[:depth], scores=ranking.scores[:depth])
    keep = ~excluded[ranking.indices]
    return replace(
        ranking, indices=ranking.indices[keep][:depth], scores=ranking.scores[keep][:depth]
    )
