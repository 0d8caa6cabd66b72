"""What a ranking retrieved that it must not have (docs/metrics.md, "Access measures"):
chunks of documents the case's principal may not read (``acl_leaks``), of revoked documents
(``revoked_retrieved``) and of superseded ones (``superseded_retrieved``), each a count of
chunks within the scored depth. Not yet part of a run's summary (issue 30, parts 3-4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragsweep.data.access import Access
from ragsweep.data.golden import GoldenCase

ACL_LEAKS = "acl_leaks"
REVOKED_RETRIEVED = "revoked_retrieved"
SUPERSEDED_RETRIEVED = "superseded_retrieved"
ACCESS_MEASURES = (ACL_LEAKS, REVOKED_RETRIEVED, SUPERSEDED_RETRIEVED)


def access_counts(
    case: GoldenCase, retrieved_docs: Sequence[str], access: Mapping[str, Access]
) -> dict[str, float]:
    """The three counts of one case, over the documents of its retrieved chunks (rank 1
    first, one entry per chunk)."""
    counts = dict.fromkeys(ACCESS_MEASURES, 0.0)
    for doc in retrieved_docs:
        item = access.get(doc)
        if item is None:
            continue
        counts[ACL_LEAKS] += not item.readable_by(case.principal)
        counts[REVOKED_RETRIEVED] += item.revoked
        counts[SUPERSEDED_RETRIEVED] += item.superseded_by is not None
    return counts


def leak_totals(per_case: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each count summed over cases, and ``cases_with_acl_leaks``."""
    totals = {name: float(sum(c[name] for c in per_case)) for name in ACCESS_MEASURES}
    totals["cases_with_acl_leaks"] = float(sum(c[ACL_LEAKS] > 0 for c in per_case))
    return totals
