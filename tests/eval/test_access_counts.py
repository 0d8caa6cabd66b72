"""Access counts of a ranking: leaks for the case's principal, revoked and superseded."""

from __future__ import annotations

from dataclasses import replace

from ragsweep.data.access import Access
from ragsweep.data.golden import EvidenceSpan, GoldenCase
from ragsweep.eval.access import access_counts, leak_totals, packed_depths

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


def test_leaks_within_a_budget_and_permission_cases() -> None:
    rows = [[("pub", 0, 600), ("pay", 0, 600)], [("pay", 0, 300), ("pay", 200, 500)], []]
    assert packed_depths(rows, [500, 1000, 2000]) == [
        {500: 0, 1000: 1, 2000: 2},
        {500: 2, 1000: 2, 2000: 2},  # overlap is paid once: 500 characters
        {500: 0, 1000: 0, 2000: 0},
    ]
    permission = replace(case(()), type="permission")
    counts = access_counts(permission, ["pub", "pay"], ACCESS, {1000: 1, 2000: 2})
    assert counts["acl_leaks_at_1000c"] == 0.0 and counts["acl_leaks_at_2000c"] == 1.0
    assert counts["permission_held"] == 0.0
    totals = leak_totals([counts, access_counts(permission, ["pub"], ACCESS, {1000: 1})])
    assert totals["n_permission"] == 2.0 and totals["permission_held"] == 0.5
