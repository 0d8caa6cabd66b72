"""Generation + judging: context packing, verdict validation, rubric rules, the judge
cache and the agreement report; model calls go to a real local HTTP server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.chunk.chunkers import Chunk
from ragsweep.cli.judge_agreement import main
from ragsweep.config.app import plain_config
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.data.golden import EvidenceSpan
from ragsweep.eval.scoring import RetrievedChunk
from ragsweep.judge import SelfPreferenceWarning, load_rubric
from ragsweep.judge.agreement import AgreementError, Floors, compare, load_human
from ragsweep.judge.context import PackedContext, coverages, pack_context
from ragsweep.judge.verdict import InvalidVerdict, parse_verdict
from ragsweep.release.store import RunStore
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import run_evaluation
from tests.fake_ollama import (
    REFUSAL,
    FakeModelServer,
    extractive_chat,
    is_judge_request,
    judge_parts,
    verdict,
)
from tests.run.test_pipeline import project_overrides

GEN, JUDGE = "gen:9b", "judge:27b"
RUBRIC = Path(__file__).resolve().parents[2] / "conf" / "rubrics" / "judge_default.yaml"


@pytest.fixture
def chat_server(model_server: FakeModelServer) -> FakeModelServer:
    model_server.add_model(GEN, "1" * 64, "completion")
    model_server.add_model(JUDGE, "2" * 64, "completion")
    model_server.add_model("fake-embed", "3" * 64, "embedding")
    return model_server


def run_judged(compose_config, project: Path, server: FakeModelServer, *extra: str):
    overrides = project_overrides(
        project,
        "tracking.enabled=false",
        "judge=ollama",
        f"judge.base_url={server.url}",
        f"judge.generator={GEN}",
        f"judge.judge={JUDGE}",
        "judge.retries=0",
        *extra,
    )
    resolved = plain_config(compose_config(*overrides))
    result = run_evaluation(resolve(resolved), project / "run")
    return result, resolved


def judge_records(out: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    return {row["id"]: row["judge"] for row in rows}


def report_row(out: Path, measure: str) -> list[str]:
    """The cells of one row of the report's judge table (all, then per type)."""
    for line in (out / "report.md").read_text().splitlines():
        if line.startswith(f"| {measure} |"):
            return [c.strip() for c in line.strip("|").split("|")][1:]
    raise AssertionError(f"no report row {measure}")


def scripted_judge(replies: dict[str, list[str]]):
    """Judge replies per question, in order (the last one repeats); anything else is
    answered by ``extractive_chat``."""

    def chat(body: dict[str, Any]) -> str:
        if is_judge_request(body):
            queue = replies.get(judge_parts(body)[0])
            if queue:
                return queue.pop(0) if len(queue) > 1 else queue[0]
        return extractive_chat(body)

    return chat


# --- context packing ---------------------------------------------------------------


DOC = "Alpha beta gamma. Refunds take 14 days. Delta epsilon zeta. Export as ZIP."


def chunk(start: int, end: int) -> Chunk:
    return Chunk(f"d@{start}-{end}", "d", start, end, DOC[start:end], ("Billing",))


def test_packing_budgets_and_coverages() -> None:
    chunks = [chunk(0, 17), chunk(18, 39), chunk(40, 59), chunk(60, 74)]
    by_id = {c.id: c for c in chunks}
    ranked = [RetrievedChunk(c.id, c.doc, c.start, c.end, 1.0) for c in chunks]
    evidence = (EvidenceSpan("d", 18, 39),)  # "Refunds take 14 days."

    by_count = pack_context(ranked, by_id, max_chunks=1, max_chars=None)
    assert [p.chunk_id for p in by_count.passages] == ["d@0-17"]
    assert by_count.truncated and by_count.chars == 17
    assert coverages(ranked, by_count, evidence) == (1.0, 0.0)  # retrieved, not packed

    by_chars = pack_context(ranked, by_id, max_chunks=5, max_chars=27)
    assert [(p.start, p.end, p.truncated) for p in by_chars.passages] == [
        (0, 17, False),
        (18, 28, True),
    ]
    assert by_chars.passages[1].text == "Refunds ta"
    assert coverages(ranked, by_chars, evidence) == (1.0, 10 / 21)

    everything = pack_context(ranked, by_id, max_chunks=5, max_chars=None)
    assert not everything.truncated and len(everything.passages) == 4
    assert coverages(ranked, everything, evidence) == (1.0, 1.0)
    assert coverages(ranked, everything, ()) == (None, None)  # unanswerable
    assert by_count.digest != everything.digest
    assert "[2] d › Billing\nRefunds take 14 days." in everything.render()
    assert PackedContext((), 0).render() == "(no passages were retrieved)"


def test_quote_verification_normalizes_whitespace_only() -> None:
    packed = pack_context(
        [RetrievedChunk("d@18-39", "d", 18, 39, 1.0)], {"d@18-39": chunk(18, 39)}, 5, None
    )
    assert packed.contains_quote("Refunds  take\n14 days")
    assert not packed.contains_quote("refunds take 14 days")  # case matters: verbatim
    assert not packed.contains_quote("Refunds take 30 days")
    assert not packed.contains_quote("   ")


# --- verdicts and rubric -------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("Sure! Here is my verdict", "not valid JSON"),
        ("[1, 2]", "a JSON list, not an object"),
        ('{"faithfulness": 2}', "missing key(s): relevance, refusal, evidence, note"),
        (verdict(3, 2), "faithfulness=3 is not an integer in 0..2"),
        (verdict(2, -1), "relevance=-1 is not an integer in 0..2"),
        (verdict(True, 2), "faithfulness=True is not an integer in 0..2"),
        (verdict("2", 2), "faithfulness='2' is not an integer in 0..2"),
        (verdict(2.0, 2), "faithfulness=2.0 is not an integer in 0..2"),
        (verdict(2, 2).replace("false", '"no"'), "refusal='no' is not true or false"),
        (verdict(2, 2, evidence=False), "evidence=False is not a string"),  # type: ignore[arg-type]
        (verdict(2, 2)[:-1] + ', "score": 2}', "unexpected key(s): score"),
    ],
)
def test_invalid_verdicts_say_why(raw: str, problem: str) -> None:
    with pytest.raises(InvalidVerdict) as caught:
        parse_verdict(raw, max_score=2)
    assert problem in str(caught.value)


def test_valid_verdict() -> None:
    parsed = parse_verdict(verdict(1, 2, refusal=False, evidence="x", note="n"), 2)
    assert (parsed.faithfulness, parsed.relevance, parsed.refusal) == (1, 2, False)
    # a raw line break inside a string (JSON forbids it; grammar-constrained servers emit it)
    raw = verdict(2, 2, evidence="EVIDENCE").replace("EVIDENCE", "},\n")
    assert "\n" in raw and parse_verdict(raw, 2).evidence == "},\n"


def test_rubric_file_is_validated(tmp_path: Path) -> None:
    rubric = load_rubric(RUBRIC)
    assert rubric.max_score == 2
    assert rubric.refusal_on_unanswerable == {"faithfulness": 2, "relevance": 2}
    assert "step order contradicts the context loses one point" in rubric.judge_prompt
    with pytest.raises(ConfigError, match="cannot read"):
        load_rubric(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("judge_prompt: grade it\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: rubric\.generator_prompt is required"):
        load_rubric(bad)
    bad.write_text(
        "generator_prompt: a\njudge_prompt: b\nrefusal_on_unanswerable: {faithfulness: 3}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="must give faithfulness and relevance"):
        load_rubric(bad)


# --- the stage in a run --------------------------------------------------------------


def test_judge_off_by_default_adds_nothing(compose_config, mini_project: Path) -> None:
    resolved = plain_config(
        compose_config(*project_overrides(mini_project, "tracking.enabled=false"))
    )
    result = run_evaluation(resolve(resolved), mini_project / "run")
    rows = (result.output_dir / "cases.jsonl").read_text().splitlines()
    assert all("judge" not in json.loads(row) for row in rows)
    assert "Generation and judging" not in (result.output_dir / "report.md").read_text()
    assert "judge_seconds" not in result.timings


def test_end_to_end_ollama_embedding_and_judge(
    compose_config, mini_project: Path, chat_server: FakeModelServer, tracking_db: Path
) -> None:
    result, resolved = run_judged(
        compose_config,
        mini_project,
        chat_server,
        "tracking.enabled=true",
        "embedding=ollama",
        "embedding.model=fake-embed",
        f"embedding.options.base_url={chat_server.url}",
    )
    out = result.output_dir
    records = judge_records(out)
    assert set(records) == {"q1", "q2", "q3", "q4"}
    assert all(r["status"] == "judged" for r in records.values())
    q1 = records["q1"]
    assert q1["evidence_status"] == "verified" and q1["evidence"] == q1["answer"]
    assert q1["candidate_coverage"] >= q1["packed_coverage"]
    assert records["q4"]["refusal"] is True and records["q4"]["rule"] == "refusal_on_unanswerable"
    assert records["q4"]["candidate_coverage"] is None

    # every generator/judge call at temperature 0 with the fixed seed; the judge in JSON mode
    chats = [r.body for r in chat_server.calls("/api/chat")]
    assert len(chats) == 8  # one answer and one verdict per case
    assert all(b["options"]["temperature"] == 0 and b["options"]["seed"] == 42 for b in chats)
    judge_calls = [b for b in chats if is_judge_request(b)]
    assert {b["model"] for b in judge_calls} == {JUDGE}
    assert {b["model"] for b in chats if "format" not in b} == {GEN}
    # the judge's output is constrained to the verdict schema, capped at verdict_tokens
    schema = judge_calls[0]["format"]
    assert schema["required"] == ["faithfulness", "relevance", "refusal", "evidence", "note"]
    assert schema["properties"]["relevance"] == {"type": "integer", "minimum": 0, "maximum": 2}
    assert {b["options"]["num_predict"] for b in judge_calls} == {256}
    # the judge of the scoped Japanese case sees only that case's chunks
    (scoped,) = [b for b in chats if is_judge_request(b) and judge_parts(b)[0] == "VPN サーバー"]
    context = judge_parts(scoped)[1]
    assert "ja/login.md" in context and "billing.md" not in context

    client = MlflowClient(tracking_uri="sqlite:///" + resolved["tracking"]["default_db"])
    run = client.get_run(result.run_id)
    metrics = run.data.metrics
    figures = RunStore(client.tracking_uri).get(result.run_id).metrics  # + figures.json
    assert metrics["judge/n_judged"] == 4
    assert metrics["judge/judge_failures"] == 0
    assert metrics["judge/refusal_rate_unanswerable"] == 1.0
    assert metrics["judge/faithfulness_mean"] == 2.0
    assert "judge/by_type/factual/faithfulness_mean" in figures
    assert "judge/by_type/factual/faithfulness_mean" not in metrics  # a table, not a metric
    assert "judge/by_type/factual/packed_coverage_mean" in figures
    assert figures["cache/judge/misses"] == 4
    assert "judge_seconds" in metrics and "recall_at_5" in metrics
    tags = run.data.tags
    assert tags["ragsweep.judge.judge_digest"] == "2" * 64
    assert tags["ragsweep.judge.judge_digest_source"] == "ollama-manifest"
    assert tags["ragsweep.judge.api"] == "ollama"
    assert tags["ragsweep.judge.server_version"] == "0.9.0-fake"
    assert tags["ragsweep.judge.temperature"] == "0.0" and tags["ragsweep.judge.seed"] == "42"
    assert tags["ragsweep.judge.output_mode"] == "ollama-format-schema"
    assert tags["ragsweep.judge.schema_honoured"] == "true"
    assert metrics["judge/invalid_verdict_share"] == 0.0
    assert metrics["judge/judge_call_seconds_mean"] > 0
    assert tags["ragsweep.embedding.backend"] == "ollama"
    assert tags["ragsweep.embedding.model"] == "fake-embed:latest"
    assert run.data.params["judge.generator"] == GEN
    report = (out / "report.md").read_text()
    assert "## Generation and judging" in report and "| recall_at_5 |" in report
    assert report_row(out, "faithfulness_mean")[0] == "2.0000"


def test_invalid_judge_json_is_retried_once_then_a_failure(
    compose_config, mini_project: Path, chat_server: FakeModelServer
) -> None:
    chat_server.chat = scripted_judge(
        {
            "How long do refunds take?": ["not json at all"],
            "How do I export my notes?": ["{oops", verdict(2, 1)],
        }
    )
    result, _ = run_judged(compose_config, mini_project, chat_server)
    records = judge_records(result.output_dir)
    failed = records["q1"]
    assert failed["status"] == "judge_failed" and failed["attempts"] == 2
    assert "not valid JSON" in failed["failure"]
    assert failed["faithfulness"] is None and failed["relevance"] is None  # never scored
    assert failed["answer"]  # the generator's answer is still recorded
    recovered = records["q2"]
    assert recovered["status"] == "judged" and recovered["attempts"] == 2
    assert (recovered["faithfulness"], recovered["relevance"]) == (2, 1)

    q2_calls = [
        b
        for b in (r.body for r in chat_server.calls("/api/chat"))
        if is_judge_request(b) and judge_parts(b)[0] == "How do I export my notes?"
    ]
    assert len(q2_calls) == 2
    retry = q2_calls[1]["messages"]
    assert retry[2] == {"role": "assistant", "content": "{oops"}
    assert "could not be used: not valid JSON" in retry[3]["content"]
    q1_judge_calls = [
        r
        for r in chat_server.calls("/api/chat")
        if is_judge_request(r.body) and judge_parts(r.body)[0] == "How long do refunds take?"
    ]
    assert len(q1_judge_calls) == 2  # retried exactly once
    assert report_row(result.output_dir, "judge_failures")[0] == "1"
    assert report_row(result.output_dir, "n_judged")[0] == "3"


def test_out_of_range_scores_are_failures_not_scores(
    compose_config, mini_project: Path, chat_server: FakeModelServer
) -> None:
    chat_server.chat = scripted_judge(
        {
            "How long do refunds take?": [verdict(3, 2)],
            "How do I export my notes?": [verdict(2, 5), verdict(2, 2)],
        }
    )
    result, _ = run_judged(compose_config, mini_project, chat_server)
    records = judge_records(result.output_dir)
    assert records["q1"]["status"] == "judge_failed"
    assert "faithfulness=3 is not an integer in 0..2" in records["q1"]["failure"]
    assert records["q2"]["status"] == "judged" and records["q2"]["relevance"] == 2
    assert report_row(result.output_dir, "judge_failures")[0] == "1"


def test_unverified_evidence_is_flagged_and_counted(
    compose_config, mini_project: Path, chat_server: FakeModelServer
) -> None:
    chat_server.chat = scripted_judge(
        {
            "How long do refunds take?": [verdict(2, 2, evidence="Refunds take 30 days")],
            "How do I export my notes?": [verdict(2, 2, evidence="export  all notes\nas a ZIP")],
        }
    )
    result, _ = run_judged(compose_config, mini_project, chat_server)
    records = judge_records(result.output_dir)
    assert records["q1"]["evidence_status"] == "unverified"
    assert records["q1"]["faithfulness"] == 2  # flagged, not rescored
    assert records["q2"]["evidence_status"] == "verified"  # whitespace differences only
    assert records["q4"]["evidence_status"] == "none"  # a refusal quotes nothing
    assert report_row(result.output_dir, "evidence_unverified")[0] == "1"


def test_refusal_on_unanswerable_case_scores_2_of_2(
    compose_config, mini_project: Path, chat_server: FakeModelServer
) -> None:
    harsh = verdict(0, 0, refusal=True, evidence="", note="it did not answer")
    chat_server.chat = scripted_judge({"Is there a pony?": [harsh], "VPN サーバー": [harsh]})
    result, _ = run_judged(compose_config, mini_project, chat_server)
    records = judge_records(result.output_dir)
    pony = records["q4"]
    assert pony["answer"] == REFUSAL
    assert (pony["faithfulness"], pony["relevance"]) == (2, 2)  # per the rubric
    assert pony["judge_scores"] == [0, 0] and pony["rule"] == "refusal_on_unanswerable"
    vpn = records["q3"]  # answerable, but the generator refused: the judge's scores stand
    assert vpn["refusal"] is True and (vpn["faithfulness"], vpn["relevance"]) == (0, 0)
    assert vpn["rule"] is None
    out = result.output_dir
    assert report_row(out, "refusal_rate_unanswerable")[0] == "1.0000"
    assert report_row(out, "refusal_rate_answerable")[0] == "0.3333"
    assert report_row(out, "abstention_accuracy")[0] == "0.7500"


def test_judge_cache_hit_on_second_run(
    compose_config, mini_project: Path, chat_server: FakeModelServer, tmp_path: Path
) -> None:
    first, _ = run_judged(compose_config, mini_project, chat_server)
    before = judge_records(first.output_dir)
    assert len(chat_server.calls("/api/chat")) == 8
    chat_server.requests.clear()

    second, _ = run_judged(compose_config, mini_project, chat_server)
    assert chat_server.calls("/api/chat") == []  # every judgment came from the cache
    assert judge_records(second.output_dir) == before
    assert second.cache_metrics["cache/judge/hits"] == 4

    edited = tmp_path / "rubric.yaml"
    edited.write_text(RUBRIC.read_text() + "\nmax_score: 2\n# same content\n", encoding="utf-8")
    run_judged(compose_config, mini_project, chat_server, f"judge.rubric={edited}")
    assert chat_server.calls("/api/chat") == []  # comments and key order are not content

    edited.write_text(RUBRIC.read_text().replace("briefly", "tersely"), encoding="utf-8")
    run_judged(compose_config, mini_project, chat_server, f"judge.rubric={edited}")
    assert len(chat_server.calls("/api/chat")) == 8  # a new rubric re-judges
    chat_server.requests.clear()

    chat_server.add_model(JUDGE, "9" * 64, "completion")  # a new version of the judge tag
    run_judged(compose_config, mini_project, chat_server)
    assert len(chat_server.calls("/api/chat")) == 8


def test_same_model_for_both_roles_warns(
    compose_config, mini_project: Path, chat_server: FakeModelServer
) -> None:
    with pytest.warns(SelfPreferenceWarning, match="self-preference bias"):
        run_judged(compose_config, mini_project, chat_server, f"judge.judge={GEN}")
    chat_server.add_model("gen-alias:latest", "1" * 64, "completion")  # same weights, new tag
    with pytest.warns(SelfPreferenceWarning):
        run_judged(compose_config, mini_project, chat_server, "judge.judge=gen-alias")


def test_missing_judge_model_fails_before_any_work(
    compose_config, mini_project: Path, chat_server: FakeModelServer
) -> None:
    with pytest.raises(BackendError, match="`ollama pull absent:1b`"):
        run_judged(compose_config, mini_project, chat_server, "judge.judge=absent:1b")
    assert not (mini_project / "run").exists()
    assert chat_server.calls("/api/chat") == []


def test_judge_config_is_validated(compose_config, mini_project: Path) -> None:
    overrides = project_overrides(mini_project, "judge=ollama", "judge.judge=x")
    resolved = plain_config(compose_config(*overrides))
    with pytest.raises(ConfigError, match=r"judge\.generator is required"):
        run_evaluation(resolve(resolved), mini_project / "run")
    overrides = project_overrides(
        mini_project, "judge=ollama", "judge.generator=a", "judge.judge=b"
    )
    resolved = plain_config(compose_config(*overrides, "judge.context_chunks=0"))
    with pytest.raises(ConfigError, match=r"judge\.context_chunks=0 must be >= 1"):
        run_evaluation(resolve(resolved), mini_project / "run")


# --- agreement -----------------------------------------------------------------------


def test_agreement_report(
    compose_config, mini_project: Path, chat_server: FakeModelServer, capsys
) -> None:
    chat_server.chat = scripted_judge({"How do I export my notes?": ["bad", "still bad"]})
    result, _ = run_judged(compose_config, mini_project, chat_server)
    human = mini_project / "human.jsonl"
    human.write_text(
        "\n".join(
            json.dumps(v)
            for v in [
                {"id": "q1", "faithfulness": 2, "relevance": 2},
                {"id": "q2", "faithfulness": 2},
                {"id": "q3", "faithfulness": 1, "refusal": False},
                {"id": "q4", "refusal": True},
                {"id": "q9", "relevance": 0},
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    main([str(result.output_dir), str(human)])
    text = capsys.readouterr().out
    # q1 agrees; q3: the generator refused (judge 2/2, refusal true) where the human says 1/false
    assert "faithfulness  1/2 agree (0.500)" in text
    assert "refusal       1/2 agree (0.500)" in text
    assert "all           2/3 agree (0.667)" in text
    assert "judge failed (not compared): q2" in text
    assert "not in the run (not compared): q9" in text
    assert "q3  faithfulness: 1 vs 2" in text and "q3  refusal: False vs True" in text

    main([str(result.output_dir / "cases.jsonl"), str(human), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["rates"]["relevance"] == 1.0
    assert len(data["disagreements"]) == 2


def test_agreement_input_errors(tmp_path: Path, capsys) -> None:
    human = tmp_path / "human.jsonl"
    human.write_text('{"id": "q1", "faithfulness": "high"}\n', encoding="utf-8")
    with pytest.raises(AgreementError, match=r"human\.jsonl:1: case 'q1': faithfulness='high'"):
        load_human(human)
    human.write_text('{"id": "q1"}\n', encoding="utf-8")
    with pytest.raises(AgreementError, match="gives none of faithfulness, relevance, refusal"):
        load_human(human)
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "q1", "metrics": null}\n', encoding="utf-8")
    with pytest.raises(SystemExit) as exited:
        main([str(cases), str(human)])
    assert exited.value.code == 2
    assert "no judged cases" in capsys.readouterr().err
    assert compare({}, {}).to_json(Floors())["rates"] == {}
