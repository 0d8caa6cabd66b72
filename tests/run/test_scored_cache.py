"""The scored-result cache (docs/caching.md, "Scored results"): a job whose rankings, golden
set and evaluation settings are unchanged reuses its scored result and case files, and
whatever it writes or logs is the same, byte for byte, as scoring again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.cache.entries import META, seal_entry
from ragsweep.config.app import plain_config
from ragsweep.core.names import ORIGIN_DRAFTED, ORIGIN_HAND
from ragsweep.data import golden, golden_lines
from ragsweep.data.quotes import resolve_quote
from ragsweep.eval.scoring import CaseResult, RetrievedChunk, Summary
from ragsweep.eval.uncertainty import Bootstrap, Bounds
from ragsweep.run.config import resolve
from ragsweep.run.files import CASES_STAGE
from ragsweep.run.pipeline import RunResult, run_evaluation
from ragsweep.run.scored import SCORES_STAGE, decode_scored, encode_scored, load_json
from tests.conftest import ComposeFn, write_jsonl

DEMO = Path(__file__).resolve().parents[2] / "demo"

FILES = (
    "cases.jsonl",
    "cases_table.json",
    "chunks.jsonl",
    "report.md",
    "metrics_at_k.svg",
    "config.yaml",
)


def run(compose_config: ComposeFn, project: Path, name: str, *extra: str) -> RunResult:
    cfg = compose_config(
        f"corpus.path={project / 'corpus'}",
        f"golden.path={project / 'golden.jsonl'}",
        f"cache.dir={project / 'cache'}",
        "chunking.size=120",
        "chunking.overlap=20",
        *extra,
    )
    return run_evaluation(resolve(plain_config(cfg)), project / name)


def logged_metrics(run_id: str | None, db: Path) -> dict[str, float]:
    """The run's MLflow metrics but its timings (``*_seconds``), which differ by nature
    (the cache figures are in figures.json, not among them)."""
    assert run_id is not None
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    metrics = client.get_run(run_id).data.metrics
    return {k: v for k, v in metrics.items() if not k.endswith("_seconds")}


def test_a_hit_writes_and_logs_what_scoring_again_does(
    compose_config: ComposeFn, mini_project: Path, tracking_db: Path
) -> None:
    cold = run(compose_config, mini_project, "cold")
    warm = run(compose_config, mini_project, "warm")
    assert cold.cache_metrics["cache/scores/misses"] == 1
    assert warm.cache_metrics["cache/scores/hits"] == 1
    assert warm.cache_metrics["cache/rankings/hits"] == 1
    for name in FILES:
        assert (warm.output_dir / name).read_bytes() == (cold.output_dir / name).read_bytes()
    assert warm.cases == cold.cases and warm.summary == cold.summary
    cold_metrics = logged_metrics(cold.run_id, tracking_db)
    warm_metrics = logged_metrics(warm.run_id, tracking_db)
    assert cold_metrics.keys() == warm_metrics.keys()
    assert {k: v for k, v in warm_metrics.items() if not k.startswith("cache/")} == {
        k: v for k, v in cold_metrics.items() if not k.startswith("cache/")
    }
    assert (warm.output_dir / "cases.jsonl").stat().st_size > 0


def test_new_cut_offs_rescore_from_the_cached_rankings(
    compose_config: ComposeFn, mini_project: Path
) -> None:
    run(compose_config, mini_project, "first", "tracking.enabled=false")
    again = run(compose_config, mini_project, "ks", "tracking.enabled=false", "eval.ks=[1,2,5]")
    assert again.cache_metrics["cache/rankings/hits"] == 1
    assert again.cache_metrics["cache/scores/misses"] == 1
    assert "recall_at_2" in again.summary.overall


def test_a_damaged_or_foreign_entry_is_scored_again(
    compose_config: ComposeFn, mini_project: Path
) -> None:
    first = run(compose_config, mini_project, "first", "tracking.enabled=false")
    (entry,) = (mini_project / "cache" / SCORES_STAGE).glob("??/*")
    data = entry / "scored.json"
    data.write_bytes(data.read_bytes().replace(b'"q1"', b'"qX"'))  # checksum no longer holds
    damaged = run(compose_config, mini_project, "damaged", "tracking.enabled=false")
    assert damaged.cache_metrics["cache/scores/corrupt"] == 1
    assert damaged.cases == first.cases

    (entry,) = (mini_project / "cache" / SCORES_STAGE).glob("??/*")
    value = json.loads((entry / "scored.json").read_bytes())
    value["results"] = value["results"][1:]  # another case list, resealed by hand
    (entry / "scored.json").write_text(json.dumps(value), encoding="utf-8")
    (entry / META).unlink()
    seal_entry(entry, SCORES_STAGE, 0.0, {})
    foreign = run(compose_config, mini_project, "foreign", "tracking.enabled=false")
    assert foreign.cache_metrics["cache/scores/corrupt"] == 1
    assert foreign.cases == first.cases
    assert (foreign.output_dir / "cases.jsonl").read_bytes() == (
        first.output_dir / "cases.jsonl"
    ).read_bytes()


@pytest.mark.parametrize("value", [0.1 + 0.2, 5e-06, 1e-300, 5e-324, float("inf"), -0.0])
def test_the_entry_keeps_every_float(value: float) -> None:
    results = (
        CaseResult(
            "q", "t", "tuning", True, {"m": value}, (RetrievedChunk("c", "d", 0, 3, value),), value
        ),
        CaseResult("u", "t", "tuning", False, None, (), 0.0),
    )
    bounds = {"m": Bounds(value, value)}
    summary = Summary(
        {"m": value},
        {"t": {"m": value}},
        {"m": value},
        {"n_cases": 2},
        {"t": 2},
        {"t": 1},
        {"latency_ms_p50": value},
        bounds,
        {"t": bounds},
        bounds,
        Bootstrap(10, 3),
        5,
        {"x": 1},
    )
    stored = load_json(json.dumps(encode_scored(results, summary)).encode())
    assert decode_scored(stored) == (results, summary)


def test_a_change_in_golden_parsing_is_a_scores_miss(
    compose_config: ComposeFn, mini_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same golden bytes, other parsed evidence (here: quotes resolved one character
    shorter, as an edit of the quote matcher would): the old scored result must not be
    reused."""
    run(compose_config, mini_project, "first", "tracking.enabled=false")

    def shorter(text: str, quote: str, occurrence: int | None = None) -> tuple[int, int]:
        start, end = resolve_quote(text, quote, occurrence)
        return start, end - 1

    monkeypatch.setattr(golden_lines, "resolve_quote", shorter)
    monkeypatch.setattr(golden, "_LOADED", {})  # as in a new process: nothing parsed yet
    again = run(compose_config, mini_project, "again", "tracking.enabled=false")
    assert again.cache_metrics["cache/scores/misses"] == 1
    assert again.cache_metrics.get("cache/scores/hits", 0) == 0
    assert again.cache_metrics.get("cache/case_files/hits", 0) == 0


def test_a_golden_edit_is_a_scores_miss(compose_config: ComposeFn, mini_project: Path) -> None:
    run(compose_config, mini_project, "first", "tracking.enabled=false")
    golden = mini_project / "golden.jsonl"
    golden.write_text(
        golden.read_text(encoding="utf-8").replace("How long do refunds", "How fast do refunds"),
        encoding="utf-8",
    )
    again = run(compose_config, mini_project, "again", "tracking.enabled=false")
    assert again.cache_metrics["cache/scores/misses"] == 1
    assert again.cache_metrics.get("cache/scores/hits", 0) == 0


def access_project(tmp_path: Path) -> Path:
    """The access demo (demo/access/) with its first case an accepted draft."""
    for name in ("corpus.jsonl", "golden.jsonl"):
        (tmp_path / name).write_bytes((DEMO / "access" / name).read_bytes())
    golden = tmp_path / "golden.jsonl"
    lines = golden.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "origin": ORIGIN_DRAFTED})
    golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def access_run(compose_config: ComposeFn, project: Path, name: str) -> RunResult:
    cfg = compose_config(
        "corpus=access_demo",
        "golden=access_demo",
        f"corpus.path={project / 'corpus.jsonl'}",
        f"golden.path={project / 'golden.jsonl'}",
        f"cache.dir={project / 'cache'}",
        "tracking.enabled=false",
    )
    return run_evaluation(resolve(plain_config(cfg)), project / name)


def test_a_hit_keeps_spans_access_and_origin(compose_config: ComposeFn, tmp_path: Path) -> None:
    project = access_project(tmp_path)
    cold = access_run(compose_config, project, "cold")
    warm = access_run(compose_config, project, "warm")
    assert warm.cache_metrics["cache/scores/hits"] == 1
    assert any(r.spans for r in cold.cases) and any(r.access for r in cold.cases)
    assert {r.origin for r in cold.cases} == {ORIGIN_HAND, ORIGIN_DRAFTED}
    assert cold.summary.access and cold.summary.by_origin and cold.summary.origin_counts
    assert warm.cases == cold.cases and warm.summary == cold.summary
    for name in ("cases.jsonl", "cases_table.json"):
        assert (warm.output_dir / name).read_bytes() == (cold.output_dir / name).read_bytes()


def test_an_access_edit_is_a_scores_miss(compose_config: ComposeFn, mini_project: Path) -> None:
    """A changed ``_access.jsonl`` (here a new ``version``: nothing else moves) is a new
    corpus snapshot, so a new scored result."""
    run(compose_config, mini_project, "first", "tracking.enabled=false")
    (mini_project / "corpus" / "_access.jsonl").write_text(
        json.dumps({"id": "billing.md", "version": "2"}) + "\n", encoding="utf-8"
    )
    again = run(compose_config, mini_project, "again", "tracking.enabled=false")
    assert again.cache_metrics["cache/scores/misses"] == 1
    assert again.cache_metrics.get("cache/scores/hits", 0) == 0


PAGES = (
    "Refunds are issued within 14 days of the request.",
    "Exports: you can export all notes as a ZIP archive from Settings.",
    "Passwords are reset from the sign-in page; the link lasts one hour.",
)
"""The pages of a JSONL document that has page starts (``metadata.page_starts``)."""


def paged_project(tmp_path: Path, starts_of: tuple[int, ...]) -> Path:
    """A JSONL corpus of one document whose page starts are the ``starts_of`` pages' own
    starts (the text is always the same), and a golden set quoting its second and third
    pages."""
    text = "\n\n".join(PAGES)
    offsets = [text.index(page) for page in PAGES]
    write_jsonl(
        tmp_path / "corpus.jsonl",
        [
            {
                "id": "manual",
                "text": text,
                "metadata": {"page_starts": [offsets[i] for i in starts_of]},
            }
        ],
    )
    cases = [
        ("q1", "How do I export my notes?", "export all notes as a ZIP archive"),
        ("q2", "How long does a reset link last?", "the link lasts one hour"),
    ]
    write_jsonl(
        tmp_path / "golden.jsonl",
        [
            {
                "id": case_id,
                "question": question,
                "type": "factual",
                "split": "tuning",
                "evidence": [{"doc": "manual", "quote": quote}],
            }
            for case_id, question, quote in cases
        ],
    )
    return tmp_path


def paged_run(compose_config: ComposeFn, project: Path, name: str, *extra: str) -> RunResult:
    cfg = compose_config(
        f"corpus.path={project / 'corpus.jsonl'}",
        f"golden.path={project / 'golden.jsonl'}",
        f"cache.dir={project / 'cache'}",
        "chunking.size=60",
        "chunking.overlap=0",
        "tracking.enabled=false",
        *extra,
    )
    return run_evaluation(resolve(plain_config(cfg)), project / name)


def case_file_entries(project: Path) -> int:
    """How many ``case_files`` entries the project's cache holds (a run's cache figures are
    taken before its files are written)."""
    return len(list((project / "cache" / CASES_STAGE).glob("??/*")))


def evidence(result: RunResult) -> list[dict[str, object]]:
    lines = (result.output_dir / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    return [span for line in lines for span in json.loads(line)["evidence"]]


def evidence_pages(result: RunResult) -> list[object]:
    return [span["page"] for span in evidence(result)]


def test_new_page_starts_alone_give_fresh_pages_on_a_scores_hit(
    compose_config: ComposeFn, tmp_path: Path
) -> None:
    """The corpus content hash leaves metadata out, so the scored result is reused when
    only page starts move; the case files, whose evidence pages come from them, are not."""
    project = paged_project(tmp_path, (0, 1, 2))
    three = paged_run(compose_config, project, "three")
    assert evidence_pages(three) == [2, 3]
    paged_run(compose_config, project, "again")
    assert case_file_entries(project) == 1  # unchanged pages: the case files are copied

    paged_project(tmp_path, (0, 2))  # pages 1-2 are one page now: same text, same scores
    two = paged_run(compose_config, project, "two")
    assert two.cache_metrics["cache/scores/hits"] == 1
    assert case_file_entries(project) == 2
    assert evidence_pages(two) == [1, 2]
    fresh = paged_run(compose_config, project, "fresh", "cache.enabled=false")
    assert evidence(two) == evidence(fresh)  # (search timings differ: ranked again)
