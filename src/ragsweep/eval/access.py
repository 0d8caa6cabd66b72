"""What a ranking retrieved that it must not have (docs/metrics.md, "Access measures"):
chunks of documents the case's principal may not read (``acl_leaks``, within the scored depth
and within each context budget), of revoked documents (``revoked_retrieved``) and of
superseded ones (``superseded_retrieved``), each a count of chunks. A permission case is
scored by them alone: it holds (``permission_held`` 1) when nothing it may not read was
retrieved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragsweep.data.access import Access
from ragsweep.data.golden import GoldenCase
from ragsweep.eval.budget import pack, prefix_union_lengths
from ragsweep.eval.metric_keys import (
    ACCESS_COUNTS,
    ACL_LEAKS,
    CASES_WITH_ACL_LEAKS,
    N_PERMISSION,
    PERMISSION_HELD,
    REVOKED_RETRIEVED,
    SUPERSEDED_RETRIEVED,
    budget_key,
)
from ragsweep.eval.relevance import Interval, IntervalBatch, codes_of
from ragsweep.eval.uncertainty import Bootstrap, Bounds, stratified_intervals

AccessRow = dict[str, float]


def access_counts(
    case: GoldenCase,
    retrieved_docs: Sequence[str],
    access: Mapping[str, Access],
    packed: Mapping[int, int] | None = None,
) -> AccessRow:
    """The counts of one case over the documents of its retrieved chunks (rank 1 first, one
    entry per chunk); ``packed``: budget → how many leading chunks that budget packed
    (``acl_leaks_at_<B>c``); a permission case also gets ``permission_held``."""
    counts = dict.fromkeys(ACCESS_COUNTS, 0.0)
    leaked = []
    for doc in retrieved_docs:
        item = access.get(doc)
        leak = item is not None and not item.readable_by(case.principal)
        leaked.append(leak)
        counts[ACL_LEAKS] += leak
        counts[REVOKED_RETRIEVED] += item is not None and item.revoked
        counts[SUPERSEDED_RETRIEVED] += item is not None and item.superseded_by is not None
    for budget, n in (packed or {}).items():
        counts[budget_key(ACL_LEAKS, budget)] = float(sum(leaked[:n]))
    if case.permission:
        counts[PERMISSION_HELD] = float(counts[ACL_LEAKS] == 0)
    return counts


def packed_depths(
    rows: Sequence[Sequence[Interval]], budgets: Sequence[int]
) -> list[dict[int, int]]:
    """Per ranking (its chunks as ``(doc, start, end)``), budget → how many of its leading
    chunks that context budget packs (:func:`ragsweep.eval.budget.pack`)."""
    if not rows:
        return []
    batch = IntervalBatch.from_rows(rows, codes_of(i[0] for row in rows for i in row))
    union = prefix_union_lengths(batch)
    n_packed = {b: pack(batch, union, b).n_packed.tolist() for b in budgets}
    return [{b: n_packed[b][i] for b in budgets} for i in range(len(rows))]


def case_access(
    cases: Sequence[GoldenCase],
    rows: Sequence[Sequence[Interval]],
    access: Mapping[str, Access],
    budgets: Sequence[int],
) -> list[AccessRow | None]:
    """Each case's counts (:func:`access_counts`) over its ranking ``rows[i]``; all None
    when the corpus has no access metadata (nothing can leak)."""
    if not access:
        return [None] * len(cases)
    packed = packed_depths(rows, budgets)
    return [
        access_counts(case, [i[0] for i in row], access, depth)
        for case, row, depth in zip(cases, rows, packed, strict=True)
    ]


def leak_totals(per_case: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each count summed over cases, ``cases_with_acl_leaks``, and for the permission cases
    their number and the share that held (``permission_held``, only when there are some)."""
    names = dict.fromkeys([*ACCESS_COUNTS, *(n for c in per_case for n in c)])
    names.pop(PERMISSION_HELD, None)
    totals = {name: float(sum(c.get(name, 0.0) for c in per_case)) for name in names}
    totals[CASES_WITH_ACL_LEAKS] = float(sum(c[ACL_LEAKS] > 0 for c in per_case))
    held = [c[PERMISSION_HELD] for c in per_case if PERMISSION_HELD in c]
    totals[N_PERMISSION] = float(len(held))
    if held:
        totals[PERMISSION_HELD] = sum(held) / len(held)
    return totals


def summarize_access(
    rows: Sequence[tuple[str, AccessRow | None]], bootstrap: Bootstrap
) -> tuple[dict[str, float], dict[str, dict[str, float]], dict[str, Bounds]]:
    """Over ``(type, counts)`` per case: the totals (:func:`leak_totals`), the totals per
    type, and the bootstrap interval of ``permission_held`` (the same resampling as every
    other rate of the run); three empty mappings when no case has counts."""
    counted = [(t, c) for t, c in rows if c is not None]
    if not counted:
        return {}, {}, {}
    types = sorted({t for t, _ in counted})
    by_type = {t: leak_totals([c for st, c in counted if st == t]) for t in types}
    held = [c for _, c in counted if PERMISSION_HELD in c]
    bounds = {}
    if held:
        bounds = stratified_intervals({"": held}, [PERMISSION_HELD], bootstrap).overall
    return leak_totals([c for _, c in counted]), by_type, bounds
