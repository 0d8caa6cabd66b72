"""Metrics at a context budget: packing, the budget metrics, and how deep a ranking must be.

The batched, vectorized implementation (ragsweep.eval.budget + ragsweep.eval.metrics) is checked
against the definition of docs/metrics.md written out in plain Python on random cases, and
on hand-worked cases.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.chunk.chunkers import chunk_document
from ragsweep.config.app import plain_config
from ragsweep.config.schema import ChunkingConfig
from ragsweep.core.errors import ConfigError
from ragsweep.data.corpus import Document, load_corpus
from ragsweep.data.golden import load_golden
from ragsweep.eval.budget import budget_depth, pack, prefix_union_lengths, retrieval_depth
from ragsweep.eval.measures import CHARS_USED, CHUNKS_USED, COVERAGE, HIT, RAN_OUT, RECALL, Measure
from ragsweep.eval.metrics import case_metrics, evidence_union, metrics_per_case
from ragsweep.eval.relevance import Interval, IntervalBatch, doc_codes
from ragsweep.eval.uncertainty import interval_keys
from ragsweep.release.store import RunStore
from ragsweep.run.config import RunConfig
from tests.run.test_pipeline import evaluate, project_overrides

BUDGETS = (1, 25, 60, 100, 180, 400)


# --- the definition, written out in plain Python ------------------------------------------


@dataclass(frozen=True)
class Expected:
    """What the definition gives for one case and one budget."""

    hit: float
    recall: float
    coverage: float
    chunks_used: int
    chars_used: int
    ran_out: bool


def packed_by_definition(ranking: Sequence[Interval], budget: int) -> tuple[list[Interval], bool]:
    """Walk the ranking from rank 1; a chunk's cost is its characters not yet covered by
    packed chunks of its document; pack it if the cost fits in what is left, else stop.
    Returns the packed chunks and whether the ranking ran out (no chunk was refused)."""
    covered: set[tuple[str, int]] = set()
    left = budget
    packed: list[Interval] = []
    for doc, start, end in ranking:
        characters = {(doc, i) for i in range(start, end)}
        cost = len(characters - covered)
        if cost > left:
            return packed, False
        left -= cost
        covered |= characters
        packed.append((doc, start, end))
    return packed, True


def hits_by_definition(chunk: Interval, span: Interval, min_span_overlap: float) -> bool:
    """Same document, and they share at least ``min_span_overlap`` of the shorter one."""
    if chunk[0] != span[0]:
        return False
    shared = max(0, min(chunk[2], span[2]) - max(chunk[1], span[1]))
    shorter = min(chunk[2] - chunk[1], span[2] - span[1])
    return shared > 0 and Fraction(shared, shorter) >= Fraction(min_span_overlap)


def expected(
    ranking: Sequence[Interval], spans: Sequence[Interval], budget: int, min_span_overlap: float
) -> Expected:
    packed, ran_out = packed_by_definition(ranking, budget)
    found = [any(hits_by_definition(c, s, min_span_overlap) for c in packed) for s in spans]
    evidence = {(d, i) for d, s, e in spans for i in range(s, e)}
    covered = {(d, i) for d, s, e in packed for i in range(s, e)}
    return Expected(
        hit=float(any(found)),
        recall=sum(found) / len(spans),
        coverage=len(evidence & covered) / len(evidence),
        chunks_used=len(packed),
        chars_used=len(covered),
        ran_out=ran_out,
    )


def random_ranking(rng: random.Random) -> list[Interval]:
    """Chunks of three documents; often overlapping, sometimes nested or repeated."""
    ranking: list[Interval] = []
    for _ in range(rng.randint(0, 12)):
        if ranking and rng.random() < 0.1:
            doc, start, end = rng.choice(ranking)  # a chunk inside (or equal to) an earlier one
            start = rng.randint(start, end - 1)
            ranking.append((doc, start, rng.randint(start + 1, end)))
            continue
        start = rng.randrange(0, 150)
        ranking.append((rng.choice("abc"), start, start + rng.randint(1, 80)))
    return ranking


def random_spans(rng: random.Random) -> list[Interval]:
    spans = []
    for _ in range(rng.randint(1, 4)):
        start = rng.randrange(0, 200)
        spans.append((rng.choice("abc"), start, start + rng.randint(1, 30)))
    return spans


def random_cases(seed: int, n: int) -> list[tuple[list[Interval], list[Interval]]]:
    rng = random.Random(seed)
    return [(random_ranking(rng), random_spans(rng)) for _ in range(n)]


def budget_values(values: Mapping[str, Any], budget: int, case: int | None = None) -> Expected:
    """The budget metrics in ``values`` (per-case arrays, or one case's numbers when
    ``case`` is None) as an :class:`Expected`."""

    def value(family: str) -> float:
        entry = values[Measure(family, budget=budget).name]
        return float(entry if case is None else entry[case])

    return Expected(
        hit=value(HIT),
        recall=value(RECALL),
        coverage=value(COVERAGE),
        chunks_used=int(value(CHUNKS_USED)),
        chars_used=int(value(CHARS_USED)),
        ran_out=bool(value(RAN_OUT)),
    )


# --- random cases against the definition --------------------------------------------------


@pytest.mark.parametrize("min_span_overlap", [1.0, 0.5])
def test_budget_metrics_match_the_definition_on_random_cases(min_span_overlap: float) -> None:
    cases = random_cases(seed=11, n=400)
    rankings, spans = [r for r, _ in cases], [s for _, s in cases]
    codes = doc_codes(*rankings, *spans)
    values = metrics_per_case(
        IntervalBatch.from_rows(rankings, codes),
        IntervalBatch.from_rows(spans, codes),
        IntervalBatch.from_rows(evidence_union(spans), codes),
        (1,),
        min_span_overlap,
        BUDGETS,
    )
    for index, (ranking, case_spans) in enumerate(cases):
        for budget in BUDGETS:
            want = expected(ranking, case_spans, budget, min_span_overlap)
            got = budget_values(values, budget, index)
            assert got == pytest.approx(want, abs=1e-12), (index, budget, ranking, case_spans)


def test_random_cases_exercise_every_outcome() -> None:
    outcomes = {
        (len(packed) == 0, len(packed) == len(ranking), ran_out)
        for ranking, _ in random_cases(seed=11, n=400)
        for budget in BUDGETS
        for packed, ran_out in [packed_by_definition(ranking, budget)]
    }
    assert (True, False, False) in outcomes  # the first chunk did not fit
    assert (False, False, False) in outcomes  # some packed, then one refused
    assert (False, True, True) in outcomes  # everything packed, the ranking ran out
    assert (True, True, True) in outcomes  # an empty ranking


def test_prefix_union_is_the_characters_of_the_first_ranks() -> None:
    cases = random_cases(seed=5, n=200)
    rankings = [r for r, _ in cases]
    batch = IntervalBatch.from_rows(rankings, doc_codes(*rankings))
    union = prefix_union_lengths(batch)
    for row, ranking in enumerate(rankings):
        for rank in range(batch.width):
            chars = {(d, i) for d, s, e in ranking[: rank + 1] for i in range(s, e)}
            assert union[row, rank] == len(chars), (row, rank)


def test_large_batches_are_scored_in_parts_with_the_same_result() -> None:
    # 5,000 rankings of 30 chunks are more cells than one part holds
    rng = random.Random(3)
    rankings = [
        [(rng.choice("ab"), s, s + rng.randint(1, 60)) for s in rng.sample(range(500), 30)]
        for _ in range(5000)
    ]
    codes = doc_codes(*rankings)
    union = prefix_union_lengths(IntervalBatch.from_rows(rankings, codes))
    for row in (0, 1234, 4999):
        alone = prefix_union_lengths(IntervalBatch.from_rows([rankings[row]], codes))
        assert union[row].tolist() == alone[0].tolist()


# --- hand-worked cases ---------------------------------------------------------------------


def at_budget(
    ranking: Sequence[Interval], spans: Sequence[Interval], budget: int
) -> dict[str, float]:
    """Budget metrics of one case, keyed by family."""
    values = case_metrics(ranking, spans, (1,), 1.0, (budget,))
    families = (HIT, RECALL, COVERAGE, CHUNKS_USED, CHARS_USED, RAN_OUT)
    return {f: values[Measure(f, budget=budget).name] for f in families}


def test_overlap_is_paid_once() -> None:
    # three 400-character windows 300 apart: 400 + 300 + 300 = 1000 characters, not 1200
    ranking = [("a", 0, 400), ("a", 300, 700), ("a", 600, 1000), ("b", 0, 10)]
    got = at_budget(ranking, [("a", 650, 690)], 1000)
    assert got[CHUNKS_USED] == 3
    assert got[CHARS_USED] == 1000
    assert got[HIT] == 1.0  # the evidence is in the third chunk
    assert got[RAN_OUT] == 0.0  # the fourth chunk did not fit: the budget is full


def test_the_worked_example_of_the_docs() -> None:
    # docs/metrics.md: rank 4 holds the span and would fit, but rank 3 ended the context
    ranking = [("a", 0, 400), ("a", 300, 700), ("b", 0, 400), ("a", 600, 1000)]
    got = at_budget(ranking, [("a", 800, 900)], 1000)
    assert (got[CHUNKS_USED], got[CHARS_USED], got[RAN_OUT], got[HIT]) == (2, 700, 0, 0)
    assert case_metrics(ranking, [("a", 800, 900)], (4,), 1.0)[Measure(HIT, k=4).name] == 1.0


def test_an_exact_fit_is_packed() -> None:
    ranking = [("a", 0, 600), ("b", 0, 400), ("c", 0, 1)]
    assert at_budget(ranking, [("b", 10, 20)], 1000)[CHUNKS_USED] == 2
    assert at_budget(ranking, [("b", 10, 20)], 999)[CHUNKS_USED] == 1


def test_a_first_chunk_larger_than_the_budget_packs_nothing() -> None:
    # the small chunk at rank 2 holds the evidence, but packing stops at the first misfit
    ranking = [("a", 0, 1200), ("b", 0, 100)]
    got = at_budget(ranking, [("b", 10, 20)], 1000)
    assert got == {
        HIT: 0.0,
        RECALL: 0.0,
        COVERAGE: 0.0,
        CHUNKS_USED: 0.0,
        CHARS_USED: 0.0,
        RAN_OUT: 0.0,
    }


def test_chunks_of_different_documents_pay_in_full() -> None:
    # the same offsets in two documents share no character
    ranking = [("a", 0, 400), ("b", 0, 400)]
    assert at_budget(ranking, [("b", 0, 50)], 799)[CHUNKS_USED] == 1
    assert at_budget(ranking, [("b", 0, 50)], 800)[CHUNKS_USED] == 2
    assert at_budget(ranking, [("b", 0, 50)], 800)[HIT] == 1.0


def test_a_chunk_already_covered_costs_nothing_but_can_hit() -> None:
    # rank 3 lies inside ranks 1 and 2 together: free, and it alone holds the whole span
    ranking = [("a", 0, 100), ("a", 50, 150), ("a", 25, 125)]
    got = at_budget(ranking, [("a", 40, 110)], 150)
    assert (got[CHUNKS_USED], got[CHARS_USED], got[HIT]) == (3, 150, 1.0)
    assert got[RAN_OUT] == 1.0  # every chunk was packed: the ranking ended first


def test_a_short_ranking_runs_out_and_an_empty_one_packs_nothing() -> None:
    short = at_budget([("a", 0, 100)], [("a", 0, 10)], 1000)
    assert (short[CHUNKS_USED], short[CHARS_USED], short[RAN_OUT], short[HIT]) == (1, 100, 1, 1)
    empty = at_budget([], [("a", 0, 10)], 1000)
    assert (empty[CHUNKS_USED], empty[RAN_OUT], empty[HIT], empty[COVERAGE]) == (0, 1, 0, 0)


def test_coverage_counts_only_packed_chunks() -> None:
    ranking = [("a", 0, 10), ("a", 10, 30), ("a", 30, 40)]
    got = at_budget(ranking, [("a", 0, 40)], 30)
    assert got[COVERAGE] == pytest.approx(30 / 40)
    assert got[CHUNKS_USED] == 2
    nothing_inside = at_budget([("a", 0, 50), ("a", 50, 60)], [("a", 45, 55)], 55)
    assert nothing_inside[COVERAGE] == pytest.approx(5 / 10)  # [45, 50) of [45, 55)
    assert nothing_inside[HIT] == 0.0  # neither of span and chunk lies inside the other


def test_budget_below_one_character_is_refused() -> None:
    batch = IntervalBatch.from_rows([[("a", 0, 10)]], {"a": 0})
    with pytest.raises(ValueError, match="budget=0"):
        pack(batch, prefix_union_lengths(batch), 0)


# --- how deep a ranking must be ------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "size", "overlap", "depth"),
    [
        (2000, 400, 0, 6),  # 5 chunks fit exactly; the 6th is refused
        (2000, 400, 100, 7),  # 6 contiguous windows cover 1,900 characters, 7 cover 2,200
        (4000, 400, 100, 14),
        (4000, 1200, 100, 4),
        (1000, 1200, 0, 1),  # one chunk is already larger than the budget
    ],
)
def test_budget_depth(budget: int, size: int, overlap: int, depth: int) -> None:
    assert budget_depth(budget, size, overlap) == depth


@pytest.mark.parametrize("seed", range(6))
def test_budget_depth_is_the_smallest_depth_that_fills_with_real_fixed_chunks(seed: int) -> None:
    # The worst ranking for filling a budget is consecutive windows of one document (the most
    # overlap); at budget_depth they fill it, one fewer can all fit.
    rng = random.Random(seed)
    size = rng.randint(50, 400)
    overlap = rng.randrange(0, size // 2)
    budget = rng.randint(size, 6 * size)
    text = "".join(rng.choice("abcdefgh") for _ in range(20 * size))
    chunks = chunk_document(Document("d", text), ChunkingConfig("fixed", size, overlap))
    depth = budget_depth(budget, size, overlap)
    consecutive = [(c.doc, c.start, c.end) for c in chunks]
    assert all(end - start == size for _, start, end in consecutive[: depth + 1])
    assert not packed_by_definition(consecutive[:depth], budget)[1]  # a chunk was refused
    assert packed_by_definition(consecutive[: depth - 1], budget)[1]  # all of them fit
    shuffled = rng.sample(consecutive, len(consecutive))
    assert not packed_by_definition(shuffled[:depth], budget)[1]  # any order fills it


def test_retrieval_depth_is_derived_when_top_k_is_null() -> None:
    assert retrieval_depth(None, (1, 5, 10), (1000, 4000), 400, 100) == 14
    assert retrieval_depth(None, (1, 5, 10), (1000, 4000), 1200, 100) == 10
    assert retrieval_depth(None, (1, 5), (), 400, 100) == 5
    assert retrieval_depth(20, (1, 5, 10), (4000,), 400, 100) == 20


def test_top_k_below_the_largest_k_names_both_keys() -> None:
    with pytest.raises(ConfigError) as info:
        retrieval_depth(3, (1, 5, 10), (), 800, 100)
    message = str(info.value)
    assert "retrieval.top_k=3" in message and "eval.ks=[1, 5, 10]" in message
    assert "retrieval.top_k >= 10" in message


def test_top_k_that_cannot_fill_the_largest_budget_names_both_keys() -> None:
    with pytest.raises(ConfigError) as info:
        retrieval_depth(10, (1, 5, 10), (1000, 4000), 400, 100)
    message = str(info.value)
    assert "retrieval.top_k=10" in message and "eval.budgets=[1000, 4000]" in message
    assert "chunking.size=400" in message and "retrieval.top_k >= 14" in message


def test_top_k_errors_come_before_work_naming_both_keys(compose_config) -> None:
    def run_config(*overrides: str) -> RunConfig:
        return RunConfig.from_container(plain_config(compose_config(*overrides)))

    with pytest.raises(ConfigError, match=r"retrieval\.top_k=3 is below .* eval\.ks"):
        run_config("retrieval.top_k=3")
    with pytest.raises(ConfigError, match=r"retrieval\.top_k=10 cannot fill .* eval\.budgets"):
        run_config("retrieval.top_k=10", "chunking.size=400")
    assert run_config("chunking.size=400").top_k == 14  # null: derived
    assert run_config("eval.budgets=[]", "chunking.size=400").top_k == 10


# --- a whole run -----------------------------------------------------------------------------


def test_a_run_scores_budgets_from_chunks_it_keeps_in_cases_jsonl(
    compose_config, mini_project: Path, tracking_db: Path
) -> None:
    budgets = (100, 250, 600)
    result, resolved = evaluate(
        compose_config, mini_project, f"eval.budgets=[{','.join(map(str, budgets))}]"
    )
    cfg = RunConfig.from_container(resolved)
    golden = load_golden(cfg.golden, load_corpus(cfg.corpus))
    spans = {c.id: [(e.doc, e.start, e.end) for e in c.evidence] for c in golden.cases}
    rows = [json.loads(line) for line in (result.output_dir / "cases.jsonl").open()]
    assert {r["answerable"] for r in rows} == {True, False}
    outcomes = set()
    for row in rows:
        if not row["answerable"]:
            assert row["metrics"] is None  # unanswerable cases get no budget metric either
            continue
        retrieved = row["retrieved"]
        ranking = list(zip(retrieved["doc"], retrieved["start"], retrieved["end"], strict=True))
        for budget in budgets:
            want = expected(ranking, spans[row["id"]], budget, cfg.eval.min_span_overlap)
            assert budget_values(row["metrics"], budget) == pytest.approx(want), row["id"]
            outcomes.add((want.chunks_used > 0, want.ran_out))
    assert {(False, False), (True, False), (True, True)} <= outcomes

    logged = MlflowClient(tracking_uri=f"sqlite:///{tracking_db}").get_run(result.run_id)
    figures = RunStore(f"sqlite:///{tracking_db}").get(result.run_id).metrics
    name = Measure(HIT, budget=250).name
    low, high = interval_keys(name)
    assert {name, low, high, f"by_type_min/{name}"} <= set(logged.data.metrics)  # headline
    for prefix in ("", "by_type/factual/", "by_type_min/"):
        assert {prefix + name, prefix + low, prefix + high} <= set(figures)
    report = (result.output_dir / "report.md").read_text()
    assert f"| {Measure(HIT, budget=250).name} | {result.summary.overall['hit_at_250c']:.4f} |" in (
        report
    )
    assert "factual (n=2)" in report


def test_a_budget_objective_is_what_the_run_returns(compose_config, mini_project: Path) -> None:
    name = Measure(RECALL, budget=2000).name
    result, _ = evaluate(
        compose_config, mini_project, "tracking.enabled=false", f"eval.objective={name}"
    )
    assert result.objective == result.summary.overall[name]


def test_the_cli_refuses_a_shallow_top_k_before_work(tmp_path: Path, mini_project: Path) -> None:
    from tests.cli.test_cli import ragsweep

    out = ragsweep(
        f"paths.output_dir={tmp_path}",
        *project_overrides(mini_project, "retrieval.top_k=3"),
        cwd=tmp_path,
    )
    assert out.returncode == 2
    assert "error: retrieval.top_k=3 is below the largest of eval.ks=[1, 3, 5, 10]" in out.stderr
    assert not (tmp_path / "cache").exists()  # no chunk was cut, nothing indexed
    assert not list(tmp_path.rglob("cases.jsonl"))
