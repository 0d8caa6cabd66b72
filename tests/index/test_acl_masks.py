"""Under ``retrieval.acl=pre`` cases of one principal and one scope share one narrowed chunk
mask (issue 30 review): a mask per query costs a full-size array and a digest each."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragsweep.config.schema import RetrievalConfig
from ragsweep.data.access import Access
from ragsweep.data.golden import EvidenceSpan, GoldenCase
from ragsweep.index.acl import AccessFilter
from ragsweep.index.base import Query, Ranked, scope_masker

ACCESS = {"pay": Access(acl=("hr",)), "old": Access(revoked=True)}
DOCS = ["pub", "pay", "old", "pub"]


def case(case_id: str, principal: tuple[str, ...] | None) -> GoldenCase:
    span = (EvidenceSpan("pub", 0, 3),)
    return GoldenCase(case_id, "?", "t", True, "tuning", span, None, 1, principal=principal)


def test_cases_of_one_principal_and_scope_share_their_narrowed_mask() -> None:
    masker = scope_masker(DOCS)
    flt = AccessFilter(ACCESS, RetrievalConfig(), masker, len(DOCS))
    scope = masker(["pub", "pay"])
    queries = [Query("q", None, "a"), Query("q", None, "b"), Query("q", scope, "c")]
    queries += [Query("q", scope, "d"), Query("q", None, "e")]
    cases = [case("a", ("hr",)), case("b", ("hr",)), case("c", ("hr",)), case("d", ("hr",))]
    cases.append(case("e", None))
    seen: list[Query] = []

    def search(batch: Sequence[Query], depth: int) -> list[Ranked]:
        seen.extend(batch)
        return [Ranked(np.zeros(0, dtype=np.int64), np.zeros(0), 0.0) for _ in batch]

    flt.search(search, queries, cases, 5)
    masks = [q.allowed for q in seen]
    assert masks[0] is masks[1] and masks[2] is masks[3]
    assert masks[0] is not masks[2] and masks[0] is not masks[4]
    assert [m.tolist() for m in (masks[0], masks[2], masks[4])] == [  # type: ignore[union-attr]
        [True, True, False, True],
        [True, True, False, True],
        [True, False, False, True],
    ]
