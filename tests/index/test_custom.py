"""``embedding=custom``: a user's retriever class through the real pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsweep.config.app import plain_config
from ragsweep.core.errors import ConfigError
from ragsweep.run.config import resolve
from tests.custom_retriever import TfidfRetriever
from tests.run.test_pipeline import evaluate, project_overrides

TFIDF = "embedding.options._target_=tests.custom_retriever.TfidfRetriever"
OFF = "tracking.enabled=false"
NFKC = "preprocess=nfkc"


def test_identity_holds_target_arguments_and_version(compose_config, mini_project: Path) -> None:
    def resolved(*extra: str):
        overrides = project_overrides(mini_project, "embedding=custom", TFIDF, *extra)
        return resolve(plain_config(compose_config(*overrides)))

    base = resolved()
    assert base.model.name == "tests.custom_retriever.TfidfRetriever"
    assert base.model.version == "1"
    hashes = {
        base.config_hash,
        resolved("+embedding.options.version='2'").config_hash,
        resolved("+embedding.options.sublinear=false").config_hash,
    }
    assert len(hashes) == 3


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("tests.nope.Retriever", r"_target_='tests.nope.Retriever' cannot be imported"),
        ("tests.custom_retriever.NoSearch", r"does not implement the retriever protocol.*search"),
        ("Retriever", r"must name a retriever class as module.Class"),
    ],
)
def test_bad_targets_fail_before_any_work(
    compose_config, mini_project: Path, target: str, message: str
) -> None:
    overrides = project_overrides(
        mini_project, "embedding=custom", f"embedding.options._target_={target}"
    )
    with pytest.raises(ConfigError, match=message):
        resolve(plain_config(compose_config(*overrides)))


def test_unknown_argument_names_the_class(compose_config, mini_project: Path) -> None:
    overrides = project_overrides(mini_project, "embedding=custom", TFIDF, "+embedding.options.k=3")
    with pytest.raises(ConfigError, match=r"TfidfRetriever\(...\) rejected its arguments"):
        resolve(plain_config(compose_config(*overrides)))


def test_custom_run_scores_and_caches_by_version(compose_config, mini_project: Path) -> None:
    first, source = evaluate(compose_config, mini_project, "embedding=custom", TFIDF, NFKC, OFF)
    by_id = {c.id: c for c in first.cases}
    assert by_id["q1"].metrics is not None and by_id["q1"].metrics["hit_at_1"] == 1.0
    assert by_id["q3"].retrieved  # the scope is applied
    assert all(r.doc == "ja/login.md" for r in by_id["q3"].retrieved)
    assert first.cache_metrics["cache/rankings/misses"] == 1.0

    again, _ = evaluate(compose_config, mini_project, "embedding=custom", TFIDF, NFKC, OFF)
    assert again.cache_metrics["cache/rankings/hits"] == 1.0
    assert [c.retrieved for c in again.cases] == [c.retrieved for c in first.cases]
    bumped, _ = evaluate(
        compose_config,
        mini_project,
        "embedding=custom",
        TFIDF,
        "+embedding.options.version='2'",
        NFKC,
        OFF,
    )
    assert bumped.cache_metrics["cache/rankings/misses"] == 1.0  # a new version searches again

    # the same scores as building and calling the class directly on the run's chunk texts
    preprocessor = resolve(source).preprocessor
    rows = [json.loads(line) for line in (first.output_dir / "chunks.jsonl").open()]
    docs = {
        p.relative_to(mini_project / "corpus").as_posix(): p.read_text("utf-8")
        for p in (mini_project / "corpus").rglob("*.md")
    }
    retriever = TfidfRetriever()
    retriever.build([preprocessor(docs[r["doc"]][r["start"] : r["end"]]) for r in rows])
    direct = retriever.search([preprocessor("How do I export my notes?")], 10, [None])[0]
    assert [rows[i]["chunk_id"] for i, _ in direct] == [r.chunk_id for r in by_id["q2"].retrieved]
    assert [round(s, 5) for _, s in direct] == [round(r.score, 5) for r in by_id["q2"].retrieved]
