"""``ragsweep-golden draft`` against a real model: Gemma 3 270M served by llama.cpp's
OpenAI-compatible server (the judge tests' fixture, marker ``llm``). The model is small and
often wrong; what is checked is what the command promises whatever the model says: every
kept draft's quotes are verbatim in their documents, drafts carry ``status: draft`` and the
model, prompt and seed, and the loader does not score them until they are accepted."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.core.names import ORIGIN_DRAFTED, STATUS_DRAFT
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import load_golden
from ragsweep.data.quotes import quote_matches
from tests.judge.test_judge_llm import REPO, LlamaServer, llama_server  # noqa: F401

pytestmark = pytest.mark.llm

DRAFTS = 1  # ~16 s a draft on 2 cores (docs/golden.md): keeps CI time small
GOLDEN = REPO / "demo" / "golden.jsonl"
CORPUS = REPO / "demo" / "corpus"
GOLDEN_CLI = Path(sys.executable).parent / "ragsweep-golden"


def test_drafts_are_verbatim_and_not_scored(llama_server: LlamaServer, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "golden.drafts.jsonl"
    command = [str(GOLDEN_CLI), "draft", "--n", str(DRAFTS), "--model", str(llama_server.model)]
    command += ["--base-url", llama_server.base_url, "--out", str(out), "--corpus", str(CORPUS)]
    command += ["--seed", "7", "--max-tokens", "120"]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout, f"({seconds:.1f} s with start-up)", file=sys.stderr)
    assert f"drafted {DRAFTS} in" in done.stdout and "kept" in done.stdout
    corpus = load_corpus(CorpusConfig(path=str(CORPUS)))
    drafts = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    for record in drafts:
        assert record["status"] == STATUS_DRAFT and record["origin"] == ORIGIN_DRAFTED
        provenance = record["metadata"]["draft"]
        assert provenance["seed"] == 7 and provenance["model_fingerprint"]
        for item in record.get("evidence", []):
            text = corpus.get(item["doc"]).text
            assert item["quote"] in text  # verbatim, not merely matched after folding
            assert quote_matches(text, item["quote"])
    assert json.loads((tmp_path / "golden.drafts.jsonl.prompt.json").read_text())["seed"] == 7
    # drafts appended to the golden set change nothing that is scored
    mixed = tmp_path / "golden.jsonl"
    mixed.write_text(GOLDEN.read_text("utf-8") + out.read_text("utf-8"), "utf-8")
    scored = load_golden(GoldenConfig(path=str(mixed)), corpus)
    assert len(scored.cases) == len(load_golden(GoldenConfig(path=str(GOLDEN)), corpus).cases)
