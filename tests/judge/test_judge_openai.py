"""The judge over an OpenAI-compatible chat API, output-mode negotiation, strict verdicts,
the reproducibility record, fixed answers and agreement with human verdicts (in a run and
from the command line). Model calls go to a real local HTTP server (tests/fake_ollama.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.cli.judge_agreement import main as agreement_main
from ragsweep.config.app import plain_config
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.judge import SelfPreferenceWarning
from ragsweep.judge.agreement import Agreement, Floors, cohen_kappa, compare
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
from tests.judge.test_judge import judge_records, report_row, scripted_judge
from tests.reliability.conftest import files_containing
from tests.run.test_pipeline import project_overrides

GEN, JUDGE = "gen-8b-instruct", "judge-32b-instruct"
SECRET = "sk-judge-test-7d41b0"


@pytest.fixture
def openai_server(model_server: FakeModelServer) -> FakeModelServer:
    model_server.add_model(GEN, "unused-1", "completion")
    model_server.add_model(JUDGE, "unused-2", "completion")
    return model_server


def run_openai(compose_config, project: Path, server: FakeModelServer, *extra: str):
    overrides = project_overrides(
        project,
        "tracking.enabled=false",
        "judge=openai",
        f"judge.base_url={server.url}/v1",
        f"judge.generator={GEN}",
        f"judge.judge={JUDGE}",
        "judge.retries=0",
        *extra,
    )
    resolved = plain_config(compose_config(*overrides))
    result = run_evaluation(resolve(resolved), project / "run")
    return result, resolved


def chat_bodies(server: FakeModelServer) -> list[dict[str, Any]]:
    return [r.body for r in server.calls("/v1/chat/completions")]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


# --- the OpenAI-compatible API in a run ------------------------------------------------


def test_openai_judge_end_to_end_with_key_from_env(
    compose_config,
    mini_project: Path,
    openai_server: FakeModelServer,
    tracking_db: Path,
    monkeypatch,
    tmp_path: Path,
) -> None:
    openai_server.api_key = SECRET
    monkeypatch.setenv("JUDGE_TEST_KEY", SECRET)
    result, resolved = run_openai(
        compose_config,
        mini_project,
        openai_server,
        "tracking.enabled=true",
        "judge.api_key_env=JUDGE_TEST_KEY",
        "judge.temperature=0.2",
    )
    records = judge_records(result.output_dir)
    assert all(r["status"] == "judged" for r in records.values()) and len(records) == 4
    assert records["q4"]["refusal"] is True and records["q4"]["output_mode"] == "json_schema"

    bodies = chat_bodies(openai_server)
    assert len(bodies) == 8
    judge_calls = [b for b in bodies if is_judge_request(b)]
    assert {b["model"] for b in judge_calls} == {JUDGE}
    assert {b["model"] for b in bodies if not is_judge_request(b)} == {GEN}
    assert all(b["temperature"] == 0.2 and b["seed"] == 42 for b in bodies)
    assert {b["max_tokens"] for b in judge_calls} == {256}
    assert {b["max_tokens"] for b in bodies if not is_judge_request(b)} == {512}
    schema_format = judge_calls[0]["response_format"]
    assert schema_format["type"] == "json_schema"
    assert schema_format["json_schema"]["schema"]["additionalProperties"] is False
    assert all("response_format" not in b for b in bodies if not is_judge_request(b))
    sent = {r.headers.get("Authorization") for r in openai_server.calls("/v1/chat/completions")}
    assert sent == {f"Bearer {SECRET}"}

    client = MlflowClient(tracking_uri="sqlite:///" + resolved["tracking"]["default_db"])
    run = client.get_run(result.run_id)
    tags, metrics = run.data.tags, run.data.metrics
    assert tags["ragsweep.judge.api"] == "openai"
    assert tags["ragsweep.judge.server_version"] == "0.9.0-fake"  # from GET /version
    assert tags["ragsweep.judge.judge_id"] == JUDGE
    assert tags["ragsweep.judge.judge_digest"] == "none"  # not a local file: unknown
    assert tags["ragsweep.judge.judge_digest_source"] == "none"
    assert tags["ragsweep.judge.judge_version"].startswith("models:")
    assert tags["ragsweep.judge.temperature"] == "0.2"
    assert tags["ragsweep.judge.output_mode"] == "json_schema"
    assert tags["ragsweep.judge.schema_honoured"] == "true"
    assert len(tags["ragsweep.judge.rubric_sha256"]) == 64
    assert metrics["judge/n_judged"] == 4 and metrics["judge/invalid_verdict_share"] == 0
    assert metrics["judge/answer_seconds_mean"] > 0 and metrics["judge/case_seconds_mean"] > 0
    logged = [*run.data.params.items(), *tags.items(), *metrics]
    assert not [item for item in logged if SECRET in str(item)]
    downloaded = Path(client.download_artifacts(result.run_id, "", str(tmp_path / "dl")))
    assert files_containing(downloaded, SECRET.encode()) == []  # cases.jsonl.gz decompressed


def test_refused_schema_mode_falls_back_and_is_recorded(
    compose_config, mini_project: Path, openai_server: FakeModelServer
) -> None:
    openai_server.response_formats = frozenset({"json_object"})  # like llama-cpp-python
    result, _ = run_openai(compose_config, mini_project, openai_server)
    judge_calls = [b for b in chat_bodies(openai_server) if is_judge_request(b)]
    # the first judge call tries json_schema (refused with 422), then json_object + schema;
    # every later call goes straight to the accepted mode
    assert [b["response_format"]["type"] for b in judge_calls[:2]] == ["json_schema", "json_object"]
    assert judge_calls[1]["response_format"]["schema"]["required"][0] == "faithfulness"
    assert len(judge_calls) == 5
    records = judge_records(result.output_dir)
    assert {r["output_mode"] for r in records.values()} == {"json_object+schema"}
    assert (
        "json_object+schema; schema honoured: true" in (result.output_dir / "report.md").read_text()
    )


def test_schema_ignored_by_server_is_measured_not_assumed(
    compose_config, mini_project: Path, openai_server: FakeModelServer
) -> None:
    openai_server.chat = scripted_judge(
        {
            # what Gemma 3 270M did through llama-cpp-python with the schema sent
            "How long do refunds take?": [verdict(1, 60), verdict(1, 60)],
            "How do I export my notes?": ['{"faithfulness": 2}', verdict(2, 2)],
        }
    )
    result, _ = run_openai(compose_config, mini_project, openai_server)
    records = judge_records(result.output_dir)
    assert records["q1"]["status"] == "judge_failed"
    assert [i["kind"] for i in records["q1"]["invalid"]] == ["schema", "schema"]
    assert "relevance=60 is not an integer in 0..2" in records["q1"]["failure"]
    assert records["q2"]["status"] == "judged" and records["q2"]["attempts"] == 2
    out = result.output_dir
    assert report_row(out, "schema_violations")[0] == "3"
    assert report_row(out, "invalid_verdict_share")[0] == "0.5000"  # 3 of 6 replies
    assert report_row(out, "judge_failure_share")[0] == "0.2500"
    assert report_row(out, "retried")[0] == "2"
    assert "schema honoured: false" in (out / "report.md").read_text()


def test_truncated_verdict_is_invalid_but_not_a_schema_violation(
    compose_config, mini_project: Path, openai_server: FakeModelServer
) -> None:
    cut = (
        '{"faithfulness": 2, "relevance": 2, "refusal": false, "evidence": "Refunds are',
        "length",
    )

    def chat(body: dict[str, Any]) -> Any:
        if is_judge_request(body) and judge_parts(body)[0] == "How long do refunds take?":
            return cut
        return extractive_chat(body)

    openai_server.chat = chat
    result, _ = run_openai(compose_config, mini_project, openai_server, "judge.verdict_tokens=32")
    failed = judge_records(result.output_dir)["q1"]
    assert [i["kind"] for i in failed["invalid"]] == ["truncated", "truncated"]
    assert "cut off at the token cap" in failed["failure"]
    assert report_row(result.output_dir, "schema_violations")[0] == "0"
    assert {b["max_tokens"] for b in chat_bodies(openai_server) if is_judge_request(b)} == {32}


def test_system_role_off_sends_one_user_message(
    compose_config, mini_project: Path, openai_server: FakeModelServer
) -> None:
    run_openai(compose_config, mini_project, openai_server, "judge.system_role=false")
    bodies = chat_bodies(openai_server)
    assert {tuple(m["role"] for m in b["messages"]) for b in bodies} == {("user",)}
    judge_call = next(b for b in bodies if is_judge_request(b))
    assert judge_call["messages"][0]["content"].startswith("You grade an answer")


def test_model_the_server_does_not_list_fails_before_any_work(
    compose_config, mini_project: Path, openai_server: FakeModelServer
) -> None:
    with pytest.raises(BackendError, match=r"does not serve model 'absent-1b' \(it serves: "):
        run_openai(compose_config, mini_project, openai_server, "judge.judge=absent-1b")
    assert not (mini_project / "run").exists()
    assert chat_bodies(openai_server) == []


def test_unreachable_server_names_the_url_and_what_to_start(
    compose_config, mini_project: Path
) -> None:
    overrides = project_overrides(
        mini_project,
        "judge=openai",
        "judge.base_url=http://127.0.0.1:9/v1",
        f"judge.generator={GEN}",
        f"judge.judge={JUDGE}",
        "judge.retries=0",
    )
    resolved = plain_config(compose_config(*overrides))
    with pytest.raises(BackendError) as caught:
        run_evaluation(resolve(resolved), mini_project / "run")
    message = str(caught.value)
    assert "cannot reach the OpenAI-compatible chat server" in message
    assert "http://127.0.0.1:9/" in message and "python -m llama_cpp.server" in message
    assert "judge.base_url" in message
    assert not (mini_project / "run").exists()


def test_unset_api_key_variable_is_a_config_error(
    compose_config, mini_project: Path, openai_server: FakeModelServer, monkeypatch
) -> None:
    monkeypatch.delenv("JUDGE_ABSENT_KEY", raising=False)
    with pytest.raises(ConfigError, match="environment variable JUDGE_ABSENT_KEY is not set"):
        run_openai(
            compose_config, mini_project, openai_server, "judge.api_key_env=JUDGE_ABSENT_KEY"
        )
    openai_server.api_key = SECRET
    with pytest.raises(BackendError, match=r"HTTP 401.*set judge\.api_key_env"):
        run_openai(compose_config, mini_project, openai_server)


def test_unknown_api_is_refused_with_the_allowed_names(compose_config, mini_project) -> None:
    overrides = project_overrides(
        mini_project, "judge=openai", "judge.api=openia", f"judge.generator={GEN}", "judge.judge=x"
    )
    resolved = plain_config(compose_config(*overrides))
    with pytest.raises(ConfigError, match=r"judge\.api='openia' is not one of: ollama, openai"):
        run_evaluation(resolve(resolved), mini_project / "run")


def test_local_weights_file_is_digested_and_keys_the_cache(
    compose_config, mini_project: Path, openai_server: FakeModelServer, tmp_path: Path
) -> None:
    weights = tmp_path / "judge.gguf"
    weights.write_bytes(b"GGUF fake weights v1")
    openai_server.add_model(str(weights), "unused-3", "completion")  # llama.cpp: id = path
    first, _ = run_openai(compose_config, mini_project, openai_server, f"judge.judge={weights}")
    record = judge_records(first.output_dir)["q1"]
    assert record["status"] == "judged"
    report = (first.output_dir / "report.md").read_text()
    assert f"file-sha256 {hashlib.sha256(weights.read_bytes()).hexdigest()[:12]}" in report
    openai_server.requests.clear()

    run_openai(compose_config, mini_project, openai_server, f"judge.judge={weights}")
    assert chat_bodies(openai_server) == []  # same weights: all from the cache

    weights.write_bytes(b"GGUF fake weights v2")  # new weights under the same id
    run_openai(compose_config, mini_project, openai_server, f"judge.judge={weights}")
    assert len(chat_bodies(openai_server)) == 8
    openai_server.requests.clear()

    openai_server.version = "0.9.1-fake"  # a server upgrade re-judges too
    run_openai(compose_config, mini_project, openai_server, f"judge.judge={weights}")
    assert len(chat_bodies(openai_server)) == 8


def test_same_served_model_for_both_roles_warns(
    compose_config, mini_project: Path, openai_server: FakeModelServer
) -> None:
    with pytest.warns(SelfPreferenceWarning, match="self-preference bias"):
        run_openai(compose_config, mini_project, openai_server, f"judge.judge={GEN}")


# --- fixed answers and agreement -------------------------------------------------------


HUMAN = [
    {"id": "q1", "answer": "Refunds take 30 days.", "faithfulness": 0, "relevance": 2},
    {"id": "q2", "answer": "Export as a ZIP from Settings > Data.", "faithfulness": 2},
    {"id": "q3", "answer": REFUSAL, "faithfulness": 0, "relevance": 0, "refusal": True},
    {"id": "q4", "answer": REFUSAL, "faithfulness": 2, "relevance": 2, "refusal": True},
]


def lenient_judge(body: dict[str, Any]) -> str:
    """A judge that gives 2/2 to everything and calls only the refusal text a refusal."""
    _, _, answer = judge_parts(body)
    refusal = answer == REFUSAL
    return verdict(2, 2, refusal=refusal, evidence="", note="looks fine")


def test_fixed_answers_and_agreement_in_the_run(
    compose_config, mini_project: Path, openai_server: FakeModelServer, tracking_db: Path
) -> None:
    human = write_jsonl(mini_project / "human.jsonl", HUMAN)
    openai_server.chat = lenient_judge
    result, resolved = run_openai(
        compose_config,
        mini_project,
        openai_server,
        "tracking.enabled=true",
        f"judge.answers={human}",
        f"judge.human={human}",
    )
    bodies = chat_bodies(openai_server)
    assert len(bodies) == 4 and all(is_judge_request(b) for b in bodies)  # no generation
    assert judge_parts(bodies[0])[2] in {h["answer"] for h in HUMAN}
    records = judge_records(result.output_dir)
    assert (
        records["q1"]["answer"] == "Refunds take 30 days."
        and records["q1"]["answer_seconds"] is None
    )

    client = MlflowClient(tracking_uri="sqlite:///" + resolved["tracking"]["default_db"])
    run = client.get_run(result.run_id)
    metrics, tags = run.data.metrics, run.data.tags
    # faithfulness: human 0,2,0,2 vs judge 2,2,2,2 (q3's judge says refusal → 2/2 kept:
    # q3 is answerable, so the refusal rule does not apply and the judge's 2/2 stands)
    assert metrics["judge/agreement/faithfulness/exact"] == 0.5
    assert metrics["judge/agreement/faithfulness/kappa"] == 0.0
    assert metrics["judge/agreement/relevance/exact"] == pytest.approx(2 / 3)
    assert metrics["judge/agreement/refusal/exact"] == 1.0
    assert "judge/agreement/refusal/kappa" not in metrics  # both always said true: undefined
    assert metrics["judge/agreement/n_compared"] == 4
    assert metrics["judge/agreement/below_floor"] == 4  # faithfulness and relevance, both ways
    assert tags["ragsweep.judge.agreement_below_floor"] == "faithfulness,relevance"
    assert tags["ragsweep.judge.generator"] == "answers:human.jsonl"
    assert tags["ragsweep.judge.generator_digest_source"] == "answers-file"
    report = (result.output_dir / "report.md").read_text()
    assert "### Judge agreement with human verdicts" in report
    assert "BELOW THE FLOOR (floors: exact 0.80, kappa 0.60)" in report
    assert "q1  faithfulness: 0 vs 2; looks fine" in report


def test_fixed_answers_missing_a_case_fail_before_any_work(
    compose_config, mini_project: Path, openai_server: FakeModelServer
) -> None:
    answers = write_jsonl(mini_project / "answers.jsonl", HUMAN[:2])
    with pytest.raises(ConfigError, match=r"has no answer for case\(s\) q3, q4"):
        run_openai(compose_config, mini_project, openai_server, f"judge.answers={answers}")
    assert not (mini_project / "run").exists() and chat_bodies(openai_server) == []


def test_agreement_cli_logs_to_the_mlflow_run(
    compose_config,
    mini_project: Path,
    openai_server: FakeModelServer,
    tracking_db: Path,
    capsys,
    monkeypatch,
) -> None:
    human = write_jsonl(mini_project / "human.jsonl", HUMAN)
    openai_server.chat = lenient_judge
    result, resolved = run_openai(
        compose_config,
        mini_project,
        openai_server,
        "tracking.enabled=true",
        f"judge.answers={human}",
        "judge.agreement_floor=0.4",
    )
    uri = "sqlite:///" + resolved["tracking"]["default_db"]
    agreement_main([result.run_id, str(human), "--tracking-uri", uri, "--kappa-floor", "-1"])
    text = capsys.readouterr().out
    assert "faithfulness  2/4 agree (0.500), kappa 0.000" in text
    assert "every axis at or above the floor (floors: exact 0.40, kappa -1.00)" in text
    assert "faithfulness (rows: human, columns: judge)" in text
    assert f"logged to MLflow run {result.run_id}" in text
    run = MlflowClient(tracking_uri=uri).get_run(result.run_id)
    assert run.data.metrics["judge/agreement/faithfulness/exact"] == 0.5
    assert run.data.tags["ragsweep.judge.agreement_below_floor"] == "none"
    artifacts = {a.path for a in MlflowClient(tracking_uri=uri).list_artifacts(result.run_id)}
    assert {"judge_agreement.md", "judge_agreement.json"} <= artifacts

    # from the run directory: floors come from its config.yaml; nothing is logged
    agreement_main([str(result.output_dir), str(human), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["floors"] == {"exact": 0.4, "kappa": 0.6}
    assert data["below_floor"] == [
        "faithfulness kappa 0.000 < 0.60",
        "relevance kappa 0.000 < 0.60",
    ]
    assert data["confusion"]["faithfulness"] == {
        "labels": [0, 2],
        "rows_human_columns_judge": [[0, 2], [0, 2]],
    }


def test_agreement_only_compares_the_answer_the_human_graded() -> None:
    judged = {
        "a": {"status": "judged", "answer": "Yes,  14 days.", "faithfulness": 2},
        "b": {"status": "judged", "answer": "No.", "faithfulness": 2, "packed_coverage": 0.5},
        "c": {"status": "judge_failed", "answer": "x"},
    }
    human = {
        "a": {"answer": "Yes, 14 days.", "faithfulness": 2},  # whitespace aside: the same
        "b": {"answer": "Yes.", "faithfulness": 0},  # another answer: not compared
        "c": {"faithfulness": 1},
        "d": {"faithfulness": 1},
    }
    result = compare(judged, human)
    assert result.compared("faithfulness") == 1 and result.rate("faithfulness") == 1.0
    assert result.answer_differs == ["b"]
    assert result.judge_failed == ["c"] and result.not_in_run == ["d"]

    partial = compare(judged, {"b": {"faithfulness": 0}})
    assert partial.partial_context == ["b"]
    assert partial.disagreements[0].packed_coverage == 0.5


def test_cohen_kappa_matches_the_textbook_example() -> None:
    # 50 items: both yes 20, A yes/B no 5, A no/B yes 10, both no 15 → p_o 0.7, p_e 0.5
    pairs = [(1, 1)] * 20 + [(1, 0)] * 5 + [(0, 1)] * 10 + [(0, 0)] * 15
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([(2, 2), (2, 2)]) is None  # one label throughout: undefined
    assert cohen_kappa([(2, 0), (0, 2)]) == pytest.approx(-1.0)
    assert cohen_kappa([]) is None
    floors = Floors(exact=0.5, kappa=0.5)
    result = Agreement(pairs={"relevance": [(str(i), a, b) for i, (a, b) in enumerate(pairs)]})
    assert result.below_floor(floors) == ["relevance kappa 0.400 < 0.50"]


def test_shipped_human_verdicts_cover_the_demo_tuning_cases() -> None:
    repo = Path(__file__).resolve().parents[2]
    golden = [json.loads(line) for line in (repo / "demo" / "golden.jsonl").open()]
    tuning = {c["id"]: c for c in golden if c["split"] == "tuning"}
    from ragsweep.judge.agreement import load_human
    from ragsweep.judge.answers import load_answers

    human = load_human(repo / "demo" / "judge_human.jsonl")
    answers = load_answers(repo / "demo" / "judge_human.jsonl")
    # every tuning case of the first 58 questions (the set the verdicts were written for)
    first = {i for i in tuning if int(i.removeprefix("q-")) <= 58}
    assert set(human) == first == set(answers.by_id)
    for case_id, verdict_ in human.items():
        assert set(verdict_) == {"answer", "faithfulness", "relevance", "refusal"}
        if not tuning[case_id].get("answerable", True) and verdict_["refusal"]:
            assert (verdict_["faithfulness"], verdict_["relevance"]) == (2, 2)  # the rubric
    labels = {f: {v[f] for v in human.values()} for f in ("faithfulness", "relevance")}
    assert labels == {"faithfulness": {0, 1, 2}, "relevance": {0, 1, 2}}  # every grade used
