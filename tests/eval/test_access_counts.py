"""Access counts of a ranking: leaks for the case's principal, revoked and superseded."""

from __future__ import annotations

from ragsweep.data.access import Access
from ragsweep.data.golden import EvidenceSpan, GoldenCase
from ragsweep.eval.access import access_counts, leak_totals

ACCESS = {
    "pay": Access(acl=("hr",)),
    "old": Access(revoked=True),
    "v1": Access(superseded_by="v2"),
}


def case(principal: tuple[str, ...] | None) -> GoldenCase:
    span = (EvidenceSpan("pub", 0, 3),)
    return GoldenCase("q", "?", "t", True, "tuning", span, None, 1, principal=principal)


def test_counts_follow_the_principal() -> None:
    docs = ["pub", "pay", "pay", "old", "v1"]
    anyone = access_counts(case(None), docs, ACCESS)
    assert anyone == {"acl_leaks": 2.0, "revoked_retrieved": 1.0, "superseded_retrieved": 1.0}
    assert access_counts(case(("hr",)), docs, ACCESS)["acl_leaks"] == 0.0
    totals = leak_totals([anyone, access_counts(case(("hr",)), ["pub"], ACCESS)])
    assert totals["acl_leaks"] == 2.0 and totals["cases_with_acl_leaks"] == 1.0
