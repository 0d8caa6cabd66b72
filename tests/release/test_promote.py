"""Promotion: a tuning run's logged config re-run on the holdout split, tagged and counted."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from ragsweep.cli.release import promote_main
from ragsweep.config.app import plain_config
from ragsweep.core.errors import ConfigError
from ragsweep.release.errors import PromotionError
from ragsweep.release.promote import count_holdout_evaluations, promote
from ragsweep.release.store import RunStore
from ragsweep.run.config import RunConfig
from tests.release_support import add_holdout_cases, evaluate, store_uri

DAY_MS = 86_400_000


@pytest.fixture
def project(mini_project: Path, tracking_db: Path) -> Path:
    return add_holdout_cases(mini_project)


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def test_promotion_logs_a_tagged_holdout_run(compose_config, project: Path) -> None:
    tuning = evaluate(compose_config, project, "tuning", "preprocess=nfkc")
    store = RunStore(store_uri(project))
    assert tuning.run_id is not None

    promotion = promote(store, tuning.run_id, project / "promoted", console=quiet())

    holdout = store.get(str(promotion.holdout.run_id))
    tuning_run = store.get(tuning.run_id)
    assert holdout.tags["ragsweep.split"] == "holdout"
    assert "ragsweep.stage" not in holdout.tags  # one tag per meaning
    assert holdout.tags["ragsweep.split"] == "holdout"
    assert holdout.tags["ragsweep.promoted_from"] == tuning.run_id
    assert holdout.tags["ragsweep.holdout_evaluations"] == "1"
    assert holdout.experiment_id == tuning_run.experiment_id
    for tag in ("ragsweep.corpus_hash", "ragsweep.golden_digest"):
        assert holdout.tags[tag] == tuning_run.tags[tag]
    # the exact logged config, with only the split switched
    logged = store.config(holdout.run_id)
    original = store.config(tuning.run_id)
    assert logged["eval"] == {**original["eval"], "split": "holdout", "allow_holdout": True}
    for group in ("corpus", "golden", "preprocess", "chunking", "embedding", "retrieval"):
        assert logged[group] == original[group], group
    assert [c.id for c in store.cases(holdout.run_id)] == ["q5", "q6", "q7"]
    assert holdout.metrics["recall_at_5"] == promotion.holdout.summary.overall["recall_at_5"]

    report = store.client.download_artifacts(holdout.run_id, "promotion.md", str(project))
    text = Path(report).read_text(encoding="utf-8")
    gap = promotion.holdout.summary.overall["recall_at_5"] - tuning.summary.overall["recall_at_5"]
    row = (
        f"| recall_at_5 | {tuning.summary.overall['recall_at_5']:.4f} | "
        f"{promotion.holdout.summary.overall['recall_at_5']:.4f} | {gap:+.4f} |"
    )
    assert row in text
    assert "| type | tuning | holdout | holdout − tuning |" in text
    assert "- **holdout power**: 3 answerable cases can detect no difference" in text


def test_promotion_refuses_a_changed_golden_set(compose_config, project: Path) -> None:
    tuning = evaluate(compose_config, project, "tuning")
    store = RunStore(store_uri(project))
    with (project / "golden.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "q9", "question": "new?", "answerable": False}) + "\n")
    with pytest.raises(PromotionError, match=r"ragsweep\.golden_digest=.*golden\.jsonl now hashes"):
        promote(store, str(tuning.run_id), project / "promoted", console=quiet())
    assert len(store.search("")) == 1  # nothing was evaluated on the holdout


def test_promotion_refuses_a_changed_corpus(compose_config, project: Path) -> None:
    tuning = evaluate(compose_config, project, "tuning")
    store = RunStore(store_uri(project))
    (project / "corpus" / "extra.md").write_text("# Extra\n\nAnother page.\n", encoding="utf-8")
    with pytest.raises(PromotionError, match=r"ragsweep\.corpus_hash=.*corpus now hashes"):
        promote(store, str(tuning.run_id), project / "promoted", console=quiet())


def test_promotion_refuses_a_config_that_resolves_differently(compose_config, project):
    synonyms = project / "synonyms.yaml"
    synonyms.write_text("groups:\n  - [refund, reimbursement]\n", encoding="utf-8")
    tuning = evaluate(
        compose_config,
        project,
        "tuning",
        "preprocess=nfkc_synonyms",
        f"preprocess.synonyms_path={synonyms}",
    )
    store = RunStore(store_uri(project))
    synonyms.write_text("groups:\n  - [refund, payback]\n", encoding="utf-8")
    with pytest.raises(PromotionError, match="resolves differently today"):
        promote(store, str(tuning.run_id), project / "promoted", console=quiet())
    assert len(store.search("")) == 1  # nothing was evaluated on the holdout


def test_promotion_refuses_a_holdout_run(compose_config, project: Path) -> None:
    tuning = evaluate(compose_config, project, "tuning")
    store = RunStore(store_uri(project))
    promoted = promote(store, str(tuning.run_id), project / "p1", console=quiet())
    with pytest.raises(PromotionError, match="split 'holdout'; promotion takes a tuning run"):
        promote(store, str(promoted.holdout.run_id), project / "p2", console=quiet())


def test_direct_holdout_evaluation_needs_the_flag(compose_config, project: Path) -> None:
    overrides = [f"corpus.path={project / 'corpus'}", f"golden.path={project / 'golden.jsonl'}"]
    refused = plain_config(compose_config(*overrides, "eval.split=holdout"))
    with pytest.raises(ConfigError, match=r"eval\.split=holdout is reserved for promotion"):
        RunConfig.from_container(refused)
    allowed = plain_config(
        compose_config(*overrides, "eval.split=holdout", "eval.allow_holdout=true")
    )
    assert RunConfig.from_container(allowed).eval.split == "holdout"


def test_holdout_overuse_warns_and_is_recorded(compose_config, project: Path) -> None:
    tuning = evaluate(compose_config, project, "tuning")
    store = RunStore(store_uri(project))
    first_out, second_out = io.StringIO(), io.StringIO()
    first = promote(
        store, str(tuning.run_id), project / "p1", max_uses=1, console=Console(file=first_out)
    )
    second = promote(
        store, str(tuning.run_id), project / "p2", max_uses=1, console=Console(file=second_out)
    )

    assert (first.usage.count, first.usage.overused) == (1, False)
    assert (second.usage.count, second.usage.overused) == (2, True)
    assert "warning" not in first_out.getvalue()
    warned = second_out.getvalue()
    assert "warning: holdout of golden set" in warned and "2 time(s)" in warned
    assert store.get(str(second.holdout.run_id)).tags["ragsweep.holdout_evaluations"] == "2"

    digest = first.usage.golden_digest
    started = store.get(str(second.holdout.run_id)).start_time_ms
    assert count_holdout_evaluations(store, digest, 30, started) == 2
    assert count_holdout_evaluations(store, digest, 30, started + 31 * DAY_MS) == 0
    assert count_holdout_evaluations(store, "0" * 64, 30, started) == 0


def test_promote_cli_prints_the_new_run_id(
    compose_config, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tuning = evaluate(compose_config, project, "tuning")
    uri = store_uri(project)
    args = ["--latest", "--tracking-uri", uri, "--output-dir", str(project / "promoted")]
    with pytest.raises(SystemExit) as exit_info:
        promote_main(args)
    assert exit_info.value.code == 0
    new_id = capsys.readouterr().out.strip()
    run = RunStore(uri).get(new_id)
    assert run.tags["ragsweep.promoted_from"] == tuning.run_id
    assert yaml.safe_load((project / "promoted" / "config.yaml").read_text())["eval"]["split"] == (
        "holdout"
    )

    with pytest.raises(SystemExit) as exit_info:
        promote_main(["no-such-run", "--tracking-uri", uri, "--output-dir", str(project / "x")])
    assert exit_info.value.code == 2
    assert "error: no run 'no-such-run'" in capsys.readouterr().err
