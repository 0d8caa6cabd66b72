"""Contract checks on a run's rankings, made without calling a model (docs/retrieval.md,
"Contract checks"): every retrieved chunk belongs to a document of this run's corpus
snapshot, and under a filter (``retrieval.acl`` ``pre`` or ``post``, ``latest_only``) no case
retrieved a chunk it may not (a revoked document, one its principal may not read, a
superseded one): a backend that ignores the chunk mask it was given is named. The query
embedding's dimension is checked by the dense index itself
(:func:`ragsweep.index.backends.dense.check_query_dimension`). Every failure of a run is
reported at once, before the run writes its files or logs anything; a newly computed
rankings cache entry is already written then, and is checked again on every read.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

from ragsweep.core.errors import ContractError, ProblemList
from ragsweep.data.golden import GoldenCase
from ragsweep.eval.scoring import CaseResult
from ragsweep.index.acl import AccessFilter


def check_retrieved(
    results: Sequence[CaseResult],
    cases: Sequence[GoldenCase],
    corpus: Container[str],
    flt: AccessFilter,
    backend: str,
) -> None:
    """ContractError listing every case whose ranking breaks a contract (module
    docstring); ``backend`` names the retriever in the message."""
    retrieved = {chunk.doc for result in results for chunk in result.retrieved}
    if not flt.active and all(doc in corpus for doc in retrieved):
        return  # the usual case: one pass over the retrieved documents
    problems = ProblemList("retrieval contracts", ContractError)
    for result, case in zip(results, cases, strict=True):
        docs = list(dict.fromkeys(c.doc for c in result.retrieved))
        unknown = [d for d in docs if d not in corpus]
        if unknown:
            problems.add(
                f"case {case.id!r}: retrieved chunk(s) of {unknown[:3]}, which are no documents "
                "of this run's corpus snapshot"
            )
        if not flt.active:
            continue
        barred = set(flt.excluded(case.principal)).intersection(docs)
        if barred:
            problems.add(
                f"case {case.id!r}: with retrieval.acl={flt.cfg.acl}, backend {backend!r} "
                f"returned chunk(s) of {sorted(barred)[:3]}, which the case may not retrieve: "
                "it ignores the chunk mask of its queries (Query.allowed)"
            )
    problems.raise_if_any()
