"""Contract checks made without a model (issue 30): the query embedding's dimension, retrieved
chunks outside the corpus snapshot, chunks a case may not retrieve under a filter."""

from __future__ import annotations

import numpy as np
import pytest

from ragsweep.config.schema import RetrievalConfig
from ragsweep.core.errors import ContractError
from ragsweep.data.access import Access
from ragsweep.data.golden import EvidenceSpan, GoldenCase
from ragsweep.eval.scoring import CaseResult, RetrievedChunk
from ragsweep.index.acl import AccessFilter
from ragsweep.index.backends.dense import check_query_dimension
from ragsweep.index.base import scope_masker
from ragsweep.index.encoding import ModelIdentity
from ragsweep.run.contracts import check_retrieved

ACCESS = {"pay": Access(acl=("hr",)), "old": Access(revoked=True)}
DOCS = ["pub", "pay", "old"]


def case(case_id: str, principal: tuple[str, ...] | None) -> GoldenCase:
    span = (EvidenceSpan("pub", 0, 3),)
    return GoldenCase(case_id, "?", "t", True, "tuning", span, None, 1, principal=principal)


def result(case_id: str, *docs: str) -> CaseResult:
    chunks = tuple(RetrievedChunk(f"{d}:0-3", d, 0, 3, 1.0) for d in docs)
    return CaseResult(case_id, "t", "tuning", True, None, chunks, 0.0)


def test_every_broken_ranking_is_named_at_once() -> None:
    flt = AccessFilter(ACCESS, RetrievalConfig(), scope_masker(DOCS), len(DOCS))
    cases = [case("a", None), case("b", ("hr",)), case("c", ("hr",))]
    results = [result("a", "pub", "pay"), result("b", "pay", "old"), result("c", "ghost")]
    with pytest.raises(ContractError) as caught:
        check_retrieved(results, cases, set(DOCS), flt, "vectordb")
    message = str(caught.value)
    assert "retrieval contracts: 3 problems" in message
    assert "case 'a': with retrieval.acl=pre, backend 'vectordb' returned chunk(s) of ['pay']" in (
        message
    )
    assert "case 'b': with retrieval.acl=pre, backend 'vectordb' returned chunk(s) of ['old']" in (
        message
    )
    assert "case 'c': retrieved chunk(s) of ['ghost'], which are no documents" in message
    off = AccessFilter(ACCESS, RetrievalConfig(acl="off"), scope_masker(DOCS), len(DOCS))
    check_retrieved(results[:2], cases[:2], set(DOCS), off, "vectordb")  # off measures leaks


def test_a_query_embedding_of_another_dimension_is_named() -> None:
    model = ModelIdentity("sentence_transformers", "mini", "1", 4, True)
    check_query_dimension(np.zeros((2, 4)), np.zeros((5, 4)), model)
    with pytest.raises(ContractError, match="query embedding dimension 3 is not the index's 4"):
        check_query_dimension(np.zeros((2, 3)), np.zeros((5, 4)), model)
