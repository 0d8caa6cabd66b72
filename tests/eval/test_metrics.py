from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
import pytrec_eval

from ragsweep.eval import measures
from ragsweep.eval.metrics import (
    case_metrics,
    coverage_at_k,
    coverage_of,
    evidence_union,
    hit_at_k,
    mean_by_key,
    metrics_per_case,
    ndcg_at_k,
    recall_at_k,
    reciprocal_rank,
)
from ragsweep.eval.relevance import Interval, IntervalBatch, SpanHits, doc_codes, span_hits_by_rank

KS = (1, 3, 5, 10)
N_RANDOM_CASES = 240
TOLERANCE = 1e-9


def _dcg(ranks: list[int]) -> float:
    return sum(1.0 / math.log2(rank + 1) for rank in ranks)


def _one(hits: list[frozenset[int]], n_spans: int) -> SpanHits:
    """A batch of one case."""
    return SpanHits.from_sets([hits], [n_spans])


def _value(metric: object, hits: list[frozenset[int]], n_spans: int, *k: int) -> float:
    """``metric`` of one case given as per-rank span sets."""
    return float(metric(_one(hits, n_spans), *k)[0])  # type: ignore[operator]


def _coverage(ranked: Sequence[Interval], spans: Sequence[Interval], k: int) -> float:
    codes = doc_codes(ranked, spans)
    batch = IntervalBatch.from_rows([ranked], codes)
    evidence = IntervalBatch.from_rows(evidence_union([spans]), codes)
    return float(coverage_at_k(batch, evidence, k)[0])


# --- cross-check against trec_eval -------------------------------------------------------


@dataclass(frozen=True)
class RankingCase:
    """A case built from per-rank span choices: ``targets[i]`` is the span that rank i+1 hits,
    or None for a miss. Each chunk hits at most one span; a span may be hit at several ranks."""

    n_spans: int
    targets: tuple[int | None, ...]

    def spans(self) -> list[Interval]:
        return [(f"doc{j % 2}", 1000 * j + 100, 1000 * j + 150) for j in range(self.n_spans)]

    def ranked(self) -> list[Interval]:
        return [self._chunk(rank, target) for rank, target in enumerate(self.targets)]

    def expected_hits(self) -> list[frozenset[int]]:
        return [frozenset() if target is None else frozenset({target}) for target in self.targets]

    def _chunk(self, rank: int, target: int | None) -> Interval:
        if target is not None:  # contains span `target` and no other
            return (f"doc{target % 2}", 1000 * target + 100 - rank, 1000 * target + 150 + rank)
        if rank % 2:  # partial overlap with span 0: a miss at min_span_overlap 1.0
            return ("doc0", 120, 200 + rank)
        return ("filler", 10 * rank, 10 * rank + 5)

    def trec_qrels(self) -> dict[str, int]:
        return {f"s{j}": 1 for j in range(self.n_spans)}

    def trec_run(self) -> dict[str, float]:
        """Rank i+1 is doc ``s{j}`` at the first hit of span j; repeat hits and misses are
        distinct non-relevant filler docs. Scores strictly decrease so trec_eval keeps the
        order (it sorts by score, then by docid)."""
        run: dict[str, float] = {}
        seen: set[int] = set()
        for rank, target in enumerate(self.targets):
            is_first_hit = target is not None and target not in seen
            doc_id = f"s{target}" if is_first_hit else f"filler{rank}"
            run[doc_id] = float(len(self.targets) - rank)
            if target is not None:
                seen.add(target)
        return run


def _random_case(rng: random.Random) -> RankingCase:
    n_spans = rng.randint(1, 5)
    length = rng.randint(0, 15)
    miss_rate = rng.choice([0.0, 0.5, 0.8, 1.0])
    targets = tuple(
        None if rng.random() < miss_rate else rng.randrange(n_spans) for _ in range(length)
    )
    return RankingCase(n_spans, targets)


FIXED_CASES = [
    RankingCase(1, ()),  # empty ranking
    RankingCase(3, ()),
    RankingCase(2, (None, None, None)),  # no hit
    RankingCase(4, (None, 2, None, 2, 0)),  # partial, with a repeat hit
    RankingCase(2, (1, 0)),  # perfect
    RankingCase(5, (None,) * 10 + (3,)),  # hit only past k=10
]


def _cross_check_cases() -> list[RankingCase]:
    rng = random.Random(20240611)
    return FIXED_CASES + [_random_case(rng) for _ in range(N_RANDOM_CASES)]


def _trec_results(cases: list[RankingCase]) -> dict[str, dict[str, float]]:
    cutoffs = ",".join(str(k) for k in KS)
    measures = {f"recall.{cutoffs}", f"success.{cutoffs}", f"ndcg_cut.{cutoffs}", "recip_rank"}
    qrels = {f"q{i}": case.trec_qrels() for i, case in enumerate(cases)}
    run = {f"q{i}": case.trec_run() for i, case in enumerate(cases)}
    results: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(
        run
    )
    return results


def _as_trec_names(metrics: dict[str, float]) -> dict[str, float]:
    renamed = {"recip_rank": metrics["mrr"]}
    for k in KS:
        renamed[f"success_{k}"] = metrics[f"hit_at_{k}"]
        renamed[f"recall_{k}"] = metrics[f"recall_at_{k}"]
        renamed[f"ndcg_cut_{k}"] = metrics[f"ndcg_at_{k}"]
    return renamed


def test_success_is_a_measure_of_pytrec_eval() -> None:
    assert {"success", "recall", "ndcg_cut", "recip_rank"} <= set(pytrec_eval.supported_measures)


def test_random_cases_cover_the_edge_cases() -> None:
    cases = _cross_check_cases()
    assert any(len(case.targets) < max(KS) for case in cases)
    assert any(len(case.targets) > max(KS) for case in cases)
    assert any(case.targets and set(case.targets) == {None} for case in cases)
    repeats = [case for case in cases if _has_repeat_hit(case.targets)]
    assert len(repeats) > 20
    assert {case.n_spans for case in cases} == {1, 2, 3, 4, 5}


def _has_repeat_hit(targets: tuple[int | None, ...]) -> bool:
    hit = [target for target in targets if target is not None]
    return len(hit) != len(set(hit))


def test_case_metrics_match_trec_eval_per_query() -> None:
    cases = _cross_check_cases()
    trec = _trec_results(cases)
    assert len(trec) == len(cases)
    for index, case in enumerate(cases):
        ranked, spans = case.ranked(), case.spans()
        assert span_hits_by_rank(ranked, spans, 1.0) == case.expected_hits()
        ours = _as_trec_names(case_metrics(ranked, spans, KS, 1.0))
        expected = trec[f"q{index}"]
        assert ours.keys() == expected.keys()
        for name, value in ours.items():
            assert value == pytest.approx(expected[name], abs=TOLERANCE), (index, case, name)


def test_metric_functions_match_trec_eval_on_one_batch_of_every_case() -> None:
    # One batch of rankings of different lengths and cases with 1-5 spans: the padding of
    # short rankings and of unused span slots must not change any case's value.
    cases = _cross_check_cases()
    trec = _trec_results(cases)
    batch = SpanHits.from_sets([c.expected_hits() for c in cases], [c.n_spans for c in cases])
    expected = [trec[f"q{i}"] for i in range(len(cases))]
    _assert_per_case(reciprocal_rank(batch), [e["recip_rank"] for e in expected])
    for k in KS:
        _assert_per_case(hit_at_k(batch, k), [e[f"success_{k}"] for e in expected])
        _assert_per_case(recall_at_k(batch, k), [e[f"recall_{k}"] for e in expected])
        _assert_per_case(ndcg_at_k(batch, k), [e[f"ndcg_cut_{k}"] for e in expected])


def test_metrics_per_case_on_interval_batches_match_trec_eval() -> None:
    cases = _cross_check_cases()
    trec = _trec_results(cases)
    ranked, spans = [c.ranked() for c in cases], [c.spans() for c in cases]
    codes = doc_codes(*ranked, *spans)
    values = metrics_per_case(
        IntervalBatch.from_rows(ranked, codes),
        IntervalBatch.from_rows(spans, codes),
        IntervalBatch.from_rows(evidence_union(spans), codes),
        KS,
        1.0,
    )
    for index in range(len(cases)):
        ours = _as_trec_names({name: float(array[index]) for name, array in values.items()})
        assert ours == pytest.approx(trec[f"q{index}"], abs=TOLERANCE), index


def _assert_per_case(ours: object, expected: list[float]) -> None:
    assert list(ours) == pytest.approx(expected, abs=TOLERANCE)  # type: ignore[call-overload]


# --- hand-computed cases -----------------------------------------------------------------


def test_seed_example_relevant_a_and_c_ranking_b_a_c() -> None:
    spans = [("A", 0, 10), ("C", 0, 10)]
    ranked = [("B", 0, 100), ("A", 0, 100), ("C", 0, 100)]
    metrics = case_metrics(ranked, spans, (1, 2, 3), 1.0)
    assert metrics["hit_at_1"] == 0.0
    assert metrics["hit_at_2"] == 1.0
    assert metrics["recall_at_2"] == 0.5
    assert metrics["recall_at_3"] == 1.0
    assert metrics["mrr"] == 0.5
    assert metrics["ndcg_at_3"] == pytest.approx(0.693426, abs=1e-6)


def test_chunk_hitting_two_spans_counts_both_for_recall_but_gains_once() -> None:
    hits = [frozenset({0, 1}), frozenset()]
    assert _value(recall_at_k, hits, 2, 1) == 1.0
    assert _value(hit_at_k, hits, 2, 1) == 1.0
    # gain 1 at rank 1; the ideal places two hits, at ranks 1 and 2
    assert _value(ndcg_at_k, hits, 2, 3) == pytest.approx(_dcg([1]) / _dcg([1, 2]))
    # at k=1 the ideal is min(n_spans, k) = 1 hit
    assert _value(ndcg_at_k, hits, 2, 1) == 1.0
    assert _value(recall_at_k, [frozenset({0, 1})], 3, 1) == pytest.approx(2 / 3)


def test_repeat_hits_of_one_span_count_once() -> None:
    hits = [frozenset({0}), frozenset({0}), frozenset({1}), frozenset({0, 1})]
    assert _value(recall_at_k, hits, 3, 2) == pytest.approx(1 / 3)
    assert _value(recall_at_k, hits, 3, 4) == pytest.approx(2 / 3)
    assert _value(ndcg_at_k, hits, 3, 4) == pytest.approx(_dcg([1, 3]) / _dcg([1, 2, 3]))
    assert _value(reciprocal_rank, hits, 3) == 1.0


def test_a_perfect_ranking_has_ndcg_exactly_one() -> None:
    for n in (1, 8, 10, 13):
        hits = [frozenset({i}) for i in range(n)]
        for k in (1, 5, 8, 10, 20):
            assert _value(ndcg_at_k, hits, n, k) == 1.0, (n, k)


def test_coverage_refuses_evidence_that_is_not_a_union() -> None:
    spans = [("a", 10, 30), ("a", 20, 40)]
    codes = doc_codes(spans)
    batch = IntervalBatch.from_rows([[("a", 0, 50)]], codes)
    with pytest.raises(ValueError, match="evidence_union"):
        coverage_at_k(batch, IntervalBatch.from_rows([spans], codes), 1)
    touching = IntervalBatch.from_rows([[("a", 0, 10), ("a", 10, 20)]], codes)
    assert coverage_at_k(batch, touching, 1).tolist() == [1.0]


def test_new_span_next_to_a_repeat_still_gains() -> None:
    hits = [frozenset({0}), frozenset({0, 1})]
    assert _value(ndcg_at_k, hits, 2, 2) == 1.0


def test_k_larger_than_the_ranking() -> None:
    hits = [frozenset(), frozenset({2})]
    assert _value(hit_at_k, hits, 3, 10) == 1.0
    assert _value(recall_at_k, hits, 3, 10) == pytest.approx(1 / 3)
    assert _value(ndcg_at_k, hits, 3, 10) == pytest.approx(_dcg([2]) / _dcg([1, 2, 3]))
    assert _value(hit_at_k, [], 3, 10) == 0.0
    assert _value(recall_at_k, [], 3, 10) == 0.0
    assert _value(ndcg_at_k, [], 3, 10) == 0.0
    assert _value(reciprocal_rank, [], 3) == 0.0


def test_reciprocal_rank_looks_past_every_cutoff() -> None:
    hits = [frozenset()] * 11 + [frozenset({0})]
    assert _value(reciprocal_rank, hits, 1) == pytest.approx(1 / 12)
    assert _value(hit_at_k, hits, 1, 10) == 0.0


class TestCoverage:
    # doc a: spans [10, 30) and [20, 40) overlap, union [10, 40) = 30 chars;
    # doc b: span [0, 10) = 10 chars. 40 evidence characters in all.
    SPANS = (("a", 10, 30), ("a", 20, 40), ("b", 0, 10))
    # chunks 1 and 2 overlap on [15, 25); together they cover [10, 35) of doc a = 25 chars
    # then: a doc without evidence, [5, 10) of b, all of a, and the rest of b
    RANKED = (("a", 0, 25), ("a", 15, 35), ("c", 0, 50), ("b", 5, 100), ("a", 0, 100), ("b", 0, 8))

    @pytest.mark.parametrize(
        ("k", "expected"),
        [(1, 15 / 40), (2, 25 / 40), (3, 25 / 40), (4, 30 / 40), (5, 35 / 40), (6, 1.0), (9, 1.0)],
    )
    def test_counts_each_evidence_character_once(self, k: int, expected: float) -> None:
        assert _coverage(self.RANKED, self.SPANS, k) == pytest.approx(expected)

    def test_empty_ranking_covers_nothing(self) -> None:
        assert _coverage([], self.SPANS, 5) == 0.0
        assert coverage_of([], self.SPANS) == 0.0

    def test_coverage_of_uses_the_whole_ranking(self) -> None:
        assert coverage_of(self.RANKED[:4], self.SPANS) == pytest.approx(30 / 40)

    def test_matches_counting_characters_on_random_cases(self) -> None:
        rng = random.Random(7)
        rows = [_random_intervals(rng, rng.randint(0, 8)) for _ in range(300)]
        span_rows = [_random_intervals(rng, rng.randint(1, 4)) for _ in range(300)]
        codes = doc_codes(*rows, *span_rows)
        batch = IntervalBatch.from_rows(rows, codes)
        evidence = IntervalBatch.from_rows(evidence_union(span_rows), codes)
        for k in (1, 3, 8):
            ours = coverage_at_k(batch, evidence, k)
            expected = [_counted_coverage(r[:k], s) for r, s in zip(rows, span_rows, strict=True)]
            assert list(ours) == pytest.approx(expected, abs=1e-12), k

    def test_coverage_differs_from_recall_on_partial_overlap(self) -> None:
        metrics = case_metrics([("a", 0, 25)], [("a", 10, 30)], (1,), 1.0)
        assert metrics["recall_at_1"] == 0.0
        assert metrics["coverage_at_1"] == pytest.approx(15 / 20)

    def test_rejects_no_spans(self) -> None:
        with pytest.raises(ValueError, match="at least one evidence span"):
            coverage_of([("a", 0, 10)], [])
        with pytest.raises(ValueError, match="at least one evidence span"):
            _coverage([("a", 0, 10)], [], 1)

    def test_rejects_empty_span(self) -> None:
        with pytest.raises(ValueError, match="start < end"):
            _coverage([("a", 0, 10)], [("a", 5, 5)], 1)


def _random_intervals(rng: random.Random, n: int) -> list[Interval]:
    starts = [rng.randrange(0, 60) for _ in range(n)]
    return [(rng.choice("ab"), s, s + rng.randint(1, 25)) for s in starts]


def _counted_coverage(ranked: Sequence[Interval], spans: Sequence[Interval]) -> float:
    """Coverage by brute force: sets of (doc, character) pairs."""
    evidence = {(d, i) for d, s, e in spans for i in range(s, e)}
    covered = {(d, i) for d, s, e in ranked for i in range(s, e)}
    return len(evidence & covered) / len(evidence)


# --- case_metrics, validation, averaging --------------------------------------------------


def test_case_metrics_keys() -> None:
    metrics = case_metrics([("a", 0, 10)], [("a", 0, 5)], (1, 5), 1.0)
    assert set(metrics) == {
        "hit_at_1",
        "recall_at_1",
        "ndcg_at_1",
        "coverage_at_1",
        "hit_at_5",
        "recall_at_5",
        "ndcg_at_5",
        "coverage_at_5",
        "mrr",
    }
    assert all(value == 1.0 for value in metrics.values())


def test_case_metrics_uses_min_span_overlap() -> None:
    spans = [("a", 10, 30)]
    ranked = [("a", 0, 20)]  # half of the span
    assert case_metrics(ranked, spans, (1,), 1.0)["hit_at_1"] == 0.0
    assert case_metrics(ranked, spans, (1,), 0.5)["hit_at_1"] == 1.0


def test_case_metrics_rejects_unanswerable_case() -> None:
    with pytest.raises(ValueError, match="unanswerable"):
        case_metrics([("a", 0, 10)], [], (1,), 1.0)


@pytest.mark.parametrize("k", [0, -1])
def test_rejects_cutoff_below_one(k: int) -> None:
    for metric in (hit_at_k, recall_at_k, ndcg_at_k):
        with pytest.raises(ValueError, match="k="):
            metric(_one([frozenset({0})], 1), k)
    with pytest.raises(ValueError, match="k="):
        _coverage([("a", 0, 10)], [("a", 0, 5)], k)


def test_rejects_zero_spans() -> None:
    with pytest.raises(ValueError, match="n_spans=0"):
        recall_at_k(_one([], 0), 1)
    with pytest.raises(ValueError, match="n_spans=0"):
        reciprocal_rank(_one([], 0))


def test_rejects_span_index_out_of_range() -> None:
    with pytest.raises(ValueError, match="out of range"):
        _one([frozenset({2})], 2)


def test_every_metric_computed_is_a_measure_with_a_definition() -> None:
    metrics = case_metrics([("a", 0, 10)], [("a", 0, 5)], (3,), 1.0, (50,))
    assert set(metrics) == {m.name for m in measures.computed((3,), (50,))}
    families = {name.replace("_3", "_k").replace("_50c", "_Bc") for name in metrics}
    definitions = measures.definitions((3,), (50,))
    assert families == set(definitions)
    assert all(text.strip().endswith(".") for text in definitions.values())


class TestMeanByKey:
    def test_mean_per_key(self) -> None:
        rows = [
            {"mrr": 1.0, "hit_at_1": 1.0},
            {"mrr": 0.5, "hit_at_1": 0.0},
            {"mrr": 0.0, "hit_at_1": 0.0},
        ]
        assert mean_by_key(rows) == {"mrr": pytest.approx(0.5), "hit_at_1": pytest.approx(1 / 3)}

    def test_empty_input(self) -> None:
        assert mean_by_key([]) == {}

    def test_rejects_rows_with_different_keys(self) -> None:
        with pytest.raises(ValueError, match="row 1"):
            mean_by_key([{"mrr": 1.0}, {"mrr": 1.0, "hit_at_1": 0.0}])
        with pytest.raises(ValueError, match="row 1"):
            mean_by_key([{"mrr": 1.0, "hit_at_1": 0.0}, {"mrr": 1.0}])

    def test_averages_case_metrics(self) -> None:
        spans = [("A", 0, 10), ("C", 0, 10)]
        rows = [
            case_metrics([("B", 0, 9), ("A", 0, 10)], spans, (1,), 1.0),
            case_metrics([("C", 0, 10)], spans, (1,), 1.0),
        ]
        assert mean_by_key(rows)["mrr"] == pytest.approx((0.5 + 1.0) / 2)
        assert mean_by_key(rows)["recall_at_1"] == pytest.approx(0.25)
