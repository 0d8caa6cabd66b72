"""Paired comparison over hand-built runs whose flips, deltas and p-values are known."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from mlflow.tracking import MlflowClient

from ragsweep.cli.release import compare_main
from ragsweep.release.compare import adjust_candidates, compare_runs
from ragsweep.release.comparison_markdown import render_markdown
from ragsweep.release.errors import ComparisonError
from ragsweep.release.store import RunStore

PROMOTED = "ragsweep.promoted_from"
IDENTITY = {
    "ragsweep.golden_digest": "g" * 64,
    "ragsweep.split": "holdout",
    "ragsweep.corpus_hash": "c" * 64,
    "ragsweep.min_span_overlap": "1.0",
}

# (id, type, baseline (hit@5, recall@5), candidate (hit@5, recall@5)); None = unanswerable
OUTCOMES: list[tuple[str, str, Any, Any]] = [
    ("c1", "factual", (1, 1.0), (1, 1.0)),
    ("c2", "factual", (1, 1.0), (0, 0.0)),  # hit → miss
    ("c3", "procedural", (0, 0.0), (1, 1.0)),  # miss → hit
    ("c4", "procedural", (0, 0.0), (1, 0.5)),  # miss → hit
    ("c5", "factual", (0, 0.0), (0, 0.0)),
    ("c6", "procedural", (1, 0.5), (1, 1.0)),
    ("c7", "negative", None, None),
]
BASELINE_MS = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
CANDIDATE_MS = [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 30.0]


def case_row(case_id: str, kind: str, outcome: Any, latency: float, side: str) -> dict[str, Any]:
    metrics = None
    if outcome is not None:
        hit, recall = outcome
        metrics = {
            "hit_at_1": 0.0,
            "hit_at_5": float(hit),
            "recall_at_1": 0.0,
            "recall_at_5": recall,
            "mrr": 0.5 * hit,
        }
    first = {
        "chunk_id": f"{side}-{case_id}",
        "doc": f"{side}.md",
        "start": 0,
        "end": 9,
        "score": 1.0,
    }
    return {
        "id": case_id,
        "type": kind,
        "split": "holdout",
        "answerable": outcome is not None,
        "metrics": metrics,
        "latency_ms": latency,
        "retrieved": [first],
    }


class RunBuilder:
    """Logs hand-written ``config.yaml`` and ``cases.jsonl`` artifacts as complete runs."""

    def __init__(self, uri: str, artifacts: Path) -> None:
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment = self.client.create_experiment("hand-built", artifacts.as_uri())

    def log(self, name: str, rows: Sequence[dict[str, Any]], **tags: str) -> str:
        all_tags = {**IDENTITY, "ragsweep.logged": "complete", **tags}
        run_id = str(
            self.client.create_run(self.experiment, tags=all_tags, run_name=name).info.run_id
        )
        config = {"eval": {"ks": [1, 5], "split": "holdout", "allow_holdout": True}}
        self.client.log_text(run_id, yaml.safe_dump(config), "config.yaml")
        self.client.log_text(run_id, "".join(json.dumps(r) + "\n" for r in rows), "cases.jsonl")
        self.client.set_terminated(run_id, "FINISHED")
        return run_id


@pytest.fixture
def builder(tmp_path: Path, tracking_db: Path) -> RunBuilder:
    return RunBuilder(f"sqlite:///{tracking_db}", tmp_path / "artifacts")


@pytest.fixture
def store(tracking_db: Path) -> RunStore:
    return RunStore(f"sqlite:///{tracking_db}")


def side_rows(side: str, latencies: Sequence[float]) -> list[dict[str, Any]]:
    index = 2 if side == "baseline" else 3
    return [
        case_row(o[0], o[1], o[index], ms, side) for o, ms in zip(OUTCOMES, latencies, strict=True)
    ]


def known_pair(builder: RunBuilder) -> tuple[str, str]:
    return (
        builder.log("base", side_rows("baseline", BASELINE_MS)),
        builder.log("cand", side_rows("candidate", CANDIDATE_MS)),
    )


def test_known_flips_deltas_and_p_value(builder: RunBuilder, store: RunStore) -> None:
    baseline, candidate = known_pair(builder)
    result = compare_runs(store, baseline, candidate, metric="recall_at_5")

    assert (result.n_cases, result.n_answerable, result.flips_on) == (7, 6, "hit_at_5")
    assert [f.case_id for f in result.lost] == ["c2"]
    assert [f.case_id for f in result.gained] == ["c3", "c4"]
    lost = result.lost[0]
    assert lost.baseline_first is not None and lost.baseline_first.doc == "baseline.md"
    assert lost.candidate_first is not None and lost.candidate_first.chunk_id == "candidate-c2"

    assert result.overall["recall_at_5"].baseline == pytest.approx(2.5 / 6)
    assert result.overall["recall_at_5"].delta == pytest.approx(1 / 6)
    assert result.overall["hit_at_5"].delta == pytest.approx(1 / 6)
    assert result.overall["hit_at_1"].delta == 0.0
    assert result.by_type["factual"]["recall_at_5"].delta == pytest.approx(-1 / 3)
    assert result.by_type["procedural"]["recall_at_5"].delta == pytest.approx(2 / 3)
    assert "negative" not in result.by_type
    assert result.type_counts == {"factual": 3, "procedural": 3}

    # differences 0, −1, 1, 0.5, 0, 0.5: all 2^4 sign assignments of the non-zero ones,
    # 12 of which have |sum| >= 1
    assert result.test.exact and result.test.resamples == 16
    assert result.test.p_value == pytest.approx(12 / 16)
    assert result.verdict == "inconclusive"

    for key, q in (("latency_ms_p50", 50), ("latency_ms_p95", 95)):
        assert result.latency[key].baseline == pytest.approx(np.percentile(BASELINE_MS, q))
        assert result.latency[key].candidate == pytest.approx(np.percentile(CANDIDATE_MS, q))

    decision = result.decision()
    assert decision.startswith("Decision: INCONCLUSIVE")
    assert "hit_at_5: 2 gained, 1 lost" in decision
    # 6 cases: a paired test at alpha 0.05 needs 6 cases that change, 30 at 20% changing
    assert result.tuning_delta is None
    assert result.power is not None and result.power.startswith(
        "6 answerable cases can detect no difference (a paired test needs at least 6 cases "
        "that change; with 20% of cases changing that takes 30 cases)"
    )


def test_holdout_runs_are_compared_against_the_difference_seen_on_tuning(
    builder: RunBuilder, store: RunStore
) -> None:
    """Two promoted runs: the remark names the tuning runs' difference, and whether this
    holdout could detect one that size."""
    rows = [(f"g{i:02d}", "factual", (1, 1.0), (1, 1.0)) for i in range(60)]
    tuning = []
    for value in (0.50, 0.56):
        run_id = builder.log("tuning", [case_row(i, t, b, 1.0, "x") for i, t, b, _ in rows])
        builder.client.log_metric(run_id, "recall_at_5", value)
        tuning.append(run_id)
    holdout = [
        builder.log(
            "holdout", [case_row(i, t, b, 1.0, "x") for i, t, b, _ in rows], **{PROMOTED: source}
        )
        for source in tuning
    ]
    result = compare_runs(store, *holdout)
    assert result.verdict == "inconclusive"
    assert result.tuning_delta == pytest.approx(0.06)
    assert result.power is not None
    assert result.power.startswith("on tuning the difference was +0.0600; a difference of 0.060 ")
    assert "below the 0.1" in result.power and "60 answerable cases detect" in result.power
    assert f"Power: {result.power}." in " ".join(render_markdown(result).split())


def test_objective_is_the_default_metric(builder: RunBuilder, store: RunStore) -> None:
    baseline, candidate = known_pair(builder)
    assert compare_runs(store, baseline, candidate).metric == "recall_at_5"  # eval default


def test_clear_gains_are_significant(builder: RunBuilder, store: RunStore) -> None:
    rows = [(f"g{i:02d}", "factual", (0, 0.0), (1, 1.0)) for i in range(12)]
    baseline = builder.log("b", [case_row(i, t, b, 1.0, "baseline") for i, t, b, _ in rows])
    candidate = builder.log("c", [case_row(i, t, c, 1.0, "candidate") for i, t, _, c in rows])
    better = compare_runs(store, baseline, candidate)
    assert better.test.p_value == pytest.approx(2 / 4096)
    assert better.verdict == "adopt" and better.decision().startswith("Decision: ADOPT")
    assert compare_runs(store, candidate, baseline).verdict == "reject"


@pytest.mark.parametrize("tag", sorted(IDENTITY))
def test_runs_on_other_cases_are_refused(builder: RunBuilder, store: RunStore, tag: str) -> None:
    baseline = builder.log("base", side_rows("baseline", BASELINE_MS))
    candidate = builder.log("cand", side_rows("candidate", CANDIDATE_MS), **{tag: "other"})
    with pytest.raises(ComparisonError, match=rf"{tag}: baseline .* vs candidate 'other'.*--force"):
        compare_runs(store, baseline, candidate)
    forced = compare_runs(store, baseline, candidate, force=True)
    assert len(forced.mismatches) == 1
    assert forced.decision().startswith("FORCED comparison")


def test_cases_missing_from_one_run_are_refused(builder: RunBuilder, store: RunStore) -> None:
    baseline = builder.log("base", side_rows("baseline", BASELINE_MS))
    candidate = builder.log("cand", side_rows("candidate", CANDIDATE_MS)[1:])
    with pytest.raises(ComparisonError, match=r"1 case\(s\) are in only one of runs"):
        compare_runs(store, baseline, candidate)
    assert compare_runs(store, baseline, candidate, force=True).unpaired == ("c1",)


def test_cli_prints_markdown_and_logs_it_on_the_candidate(
    builder: RunBuilder, store: RunStore, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    baseline, candidate = known_pair(builder)
    with pytest.raises(SystemExit) as exit_info:
        compare_main([baseline, candidate, "--tracking-uri", store.uri])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "**Decision: INCONCLUSIVE" in out
    assert "- `c2` (factual)\n  - first chunk: baseline `baseline.md` [0:9] score 1.000" in out
    assert "stage: **unknown**" in out  # hand-built rows without span traces
    assert "exact: all 2^4 = 16 sign assignments" in out

    artifacts = {a.path for a in store.client.list_artifacts(candidate)}
    assert {"comparison.md", "comparison.json"} <= artifacts
    local = store.client.download_artifacts(candidate, "comparison.json", str(tmp_path))
    logged = json.loads(Path(local).read_text(encoding="utf-8"))
    assert [f["id"] for f in logged["flips"]["miss_to_hit"]] == ["c3", "c4"]
    assert logged["test"]["p_value"] == pytest.approx(0.75)
    assert store.get(candidate).tags["ragsweep.compared_with"] == baseline


def test_several_candidates_are_holm_adjusted(
    builder: RunBuilder, store: RunStore, capsys: pytest.CaptureFixture[str]
) -> None:
    # 6 of 12 cases gained: p = 2/64 adopts alone, not beside a second, null candidate
    rows = [(f"g{i:02d}", "factual", (0, 0.0), (int(i < 6), float(i < 6))) for i in range(12)]
    baseline = builder.log("b", [case_row(i, t, b, 1.0, "baseline") for i, t, b, _ in rows])
    gain = builder.log("c1", [case_row(i, t, c, 1.0, "candidate") for i, t, _, c in rows])
    same = builder.log("c2", [case_row(i, t, b, 1.0, "candidate") for i, t, b, _ in rows])
    alone = compare_runs(store, baseline, gain)
    assert alone.verdict == "adopt" and alone.p_adjusted is None
    assert (alone.test.gained, alone.test.lost) == (6, 0)
    assert alone.test.low > 0  # the interval excludes 0 as p <= alpha does
    adjusted = adjust_candidates([alone, compare_runs(store, baseline, same)])
    assert adjusted[0].p_adjusted == pytest.approx(2 * 2 / 64)
    assert adjusted[0].verdict == "inconclusive" and adjusted[1].p_adjusted == 1.0
    with pytest.raises(SystemExit):
        compare_main([baseline, gain, same, "--tracking-uri", store.uri, "--no-log"])
    out = " ".join(capsys.readouterr().out.split())  # the decision line is wrapped
    assert "Holm-adjusted over 2 candidates 0.0625" in out


# (id, baseline spans, chunks packed, candidate spans, chunks packed): [rank, chunk chars]
TRACED: list[tuple[str, Any, int, Any, int]] = [
    ("split", [[1, 80]], 2, [[None, None]], 2),
    ("merged", [[1, 80]], 2, [[1, 400]], 0),  # too large for the budget: nothing packed
    ("bigger", [[1, 80]], 2, [[3, 400]], 2),  # larger too, but it fell below the packed two
    ("unchunked", [[1, 80]], 2, [[None]], 2),  # chunks not complete: chunking not judged
    ("depth", [[2, 80]], 2, [[None, 80]], 2),
    ("ranked", [[1, 80]], 2, [[4, 80]], 2),
    ("packed", [[2, 80]], 2, [[2, 80]], 1),
    ("fixed", [[9, 80], [5, 90]], 2, [[9, 80], [1, 90]], 2),
    ("same", [[1, 80]], 2, [[1, 80]], 2),
    ("respanned", [[1, 80]], 2, [[None, None], [None, None]], 2),  # its evidence changed
]


def traced_row(case_id: str, spans: Any, packed: int) -> dict[str, Any]:
    hit = float(any(s[0] is not None and s[0] <= packed for s in spans))
    row = case_row(case_id, "factual", (hit, hit), 1.0, "run")
    row["metrics"] |= {"hit_at_100c": hit, "recall_at_100c": hit, "chunks_used_at_100c": packed}
    return row | {"spans": spans, "question": f"Where is {case_id}?"}


def test_each_flip_is_explained_by_the_first_stage_that_lost_its_evidence(
    builder: RunBuilder, store: RunStore
) -> None:
    config = {"eval": {"ks": [1, 5], "budgets": [100], "split": "holdout", "allow_holdout": True}}
    runs = [
        builder.log(side, [traced_row(t[0], t[1 + 2 * i], t[2 + 2 * i]) for t in TRACED])
        for i, side in enumerate(("base", "cand"))
    ]
    for run_id in runs:
        builder.client.log_text(run_id, yaml.safe_dump(config), "config.yaml")
    result = compare_runs(store, *runs, metric="recall_at_100c")

    causes = {f.case_id: (f.cause.stage, f.cause.span) for f in result.lost + result.gained}
    assert causes == {
        "split": ("chunking", 0),
        "merged": ("chunking", 0),
        "depth": ("candidate depth", 0),
        "ranked": ("ranking", 0),
        "bigger": ("ranking", 0),
        "unchunked": ("candidate depth", 0),
        "packed": ("packing", 0),
        "fixed": ("ranking", 1),  # the span the candidate reaches, lost by the baseline
        "respanned": ("unknown", None),
    }
    assert result.attribution == {
        "lost": {"chunking": 2, "candidate depth": 2, "ranking": 2, "packing": 1, "unknown": 1},
        "gained": {"ranking": 1},
    }
    merged = next(f for f in result.lost if f.case_id == "merged")
    assert merged.question == "Where is merged?"
    assert "80 → 400 characters" in merged.cause.detail
    assert merged.cause.action.startswith("a smaller chunking.size")
    bigger = next(f for f in result.lost if f.case_id == "bigger")
    assert bigger.cause.detail == "its chunk fell from rank 1 to 3 (its chunk 80 → 400 characters)"
    markdown = render_markdown(result)
    assert "- `packed` (factual)\n  - question: Where is packed?\n" in markdown
    assert "span 1: rank 2 → 2; packed yes → no; chunk 80 chars → 80 chars" in markdown
    assert "next action: a larger budget" in markdown
    assert "- `same`" not in markdown and "Where is same?" not in markdown  # no flip: unlisted
    assert "chunk 80 chars → unknown" in markdown
    assert "hit → miss chunking 2, candidate depth 2, ranking 2, packing 1, unknown 1" in " ".join(
        markdown.split()
    )
    flips = result.to_json()["flips"]["hit_to_miss"]
    assert next(f for f in flips if f["id"] == "respanned")["spans"] == []
    assert flips[0]["spans"][0]["candidate"] == {"rank": None, "packed": False, "chunk_chars": None}


def test_questions_come_from_the_cases_already_read(
    builder: RunBuilder, store: RunStore, tmp_path: Path
) -> None:
    run_id = builder.log("traced", [traced_row("c1", [[1, 80]], 2)])
    assert [c.id for c in store.cases(run_id)] == ["c1"]
    for artifact in (tmp_path / "artifacts").rglob("cases.jsonl"):
        artifact.unlink()  # a second fetch would now fail
    assert store.questions(run_id) == {"c1": "Where is c1?"}
