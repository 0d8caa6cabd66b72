"""retrieval.parent (small-to-big): ranked chunks hand back their parents, deduplicated in
rank order and scored (budgets included) at the parents' length; the chunk rankings are
shared with parent=none (their key leaves the parent fields out) and the config hash of a
run without the keys is unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragsweep.chunk.chunkers import chunk_corpus
from ragsweep.chunk.parents import parent_chunks
from ragsweep.config.app import plain_config
from ragsweep.config.schema import ChunkingConfig, RetrievalConfig
from ragsweep.core.errors import ConfigError
from ragsweep.data.corpus import Corpus, Document
from ragsweep.index.base import Ranked
from ragsweep.index.small_to_big import parent_rankings
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import run_evaluation

TEXT = "# A\n\nalpha one. alpha two. alpha three.\n\n## B\n\nbeta one. beta two.\n\n# C\n\ngamma."


def test_parents_contain_their_chunks_and_collapse_in_rank_order() -> None:
    corpus = Corpus(documents=(Document("d.md", TEXT),), source="mem")
    chunks = chunk_corpus(corpus, ChunkingConfig("fixed", 12, 0))
    sections = parent_chunks(corpus, chunks, "section", 0)
    windows = parent_chunks(corpus, chunks, "window", 30)
    paragraphs = parent_chunks(corpus, chunks, "paragraph", 0)
    for chunk, *parents in zip(chunks, sections, windows, paragraphs, strict=True):
        for parent in parents:
            assert parent.start <= chunk.start and chunk.end <= parent.end
            assert parent.text == TEXT[parent.start : parent.end]
        assert len(parents[1].text) <= 30
    assert sections[1].text == "# A\n\nalpha one. alpha two. alpha three."  # trimmed
    assert sections[4].text == "## B\n\nbeta one. beta two."
    assert paragraphs[1].text == "alpha one. alpha two. alpha three."
    assert sections[3].start == 0 and sections[3].end == sections[4].end  # straddles A and B
    # chunks 1 and 2 lie in section A: the second collapses into the first's parent
    ranked = [Ranked(np.array([2, 1, 5]), np.array([0.9, 0.8, 0.7], np.float32), 0.0)]
    parents, collapsed = parent_rankings(ranked, chunks, corpus, RetrievalConfig(parent="section"))
    assert [parents[i].id for i in collapsed[0].indices] == [sections[2].id, sections[5].id]
    assert collapsed[0].scores.tolist() == pytest.approx([0.9, 0.7])


def test_section_parent_runs_scores_at_parent_length_and_shares_rankings(
    compose_config, mini_project: Path
) -> None:
    def run(*extra: str):
        cfg = compose_config(
            f"corpus.path={mini_project / 'corpus'}",
            f"golden.path={mini_project / 'golden.jsonl'}",
            "tracking.enabled=false",
            "chunking.size=40",
            "chunking.overlap=0",
            "eval.budgets=[60,400]",
            *extra,
        )
        resolved = resolve(plain_config(cfg))
        return resolved, run_evaluation(resolved, mini_project / "run" / str(len(extra)))

    plain, plain_run = run()
    parent, parent_run = run("retrieval.parent=section")
    old_keys = {**plain.cfg.source, "retrieval": {"top_k": None, "respect_scope": True}}
    assert resolve(old_keys).config_hash == plain.config_hash  # default: hash as before
    assert parent.config_hash != plain.config_hash
    assert plain_run.cache_metrics["cache/rankings/hits"] == 0
    assert parent_run.cache_metrics["cache/rankings/hits"] == 1  # the plain run's rankings
    # the scored result names its parents: a window run over the same rankings scores anew,
    # the same section run again reuses the section run's scores
    _, window_run = run("retrieval.parent=window", "retrieval.parent_chars=200")
    assert window_run.cache_metrics["cache/rankings/hits"] == 1
    assert window_run.cache_metrics["cache/scores/hits"] == 0
    _, again = run(
        "retrieval.parent=section", "retrieval.parent_chars=1000", "retrieval.respect_scope=true"
    )
    assert again.cache_metrics["cache/scores/hits"] == 1
    for case in parent_run.cases:
        spans = [(r.doc, r.start, r.end) for r in case.retrieved]
        assert len(spans) == len(set(spans))  # each parent once
    q1 = next(c for c in parent_run.cases if c.id == "q1")
    # its top chunk starts in "# Billing" and ends in "## Refunds": both sections
    assert q1.retrieved[0].chunk_id == "billing.md@0-104"
    # 104 characters cannot be packed into 60: the budget counts the parent's length
    assert q1.metrics["recall_at_60c"] == 0.0 and q1.metrics["recall_at_400c"] == 1.0
    with pytest.raises(ConfigError, match=r"retrieval\.parent='sectoin'.*did you mean 'section'"):
        run("retrieval.parent=sectoin")
