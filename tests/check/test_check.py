"""``ragsweep check``: every problem in one pass (file:line, key, did-you-mean), exit 2; a
clean check prints the summary and writes nothing."""

from __future__ import annotations

import json
import socket
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from ragsweep.check import chunk_counts, run_checks
from ragsweep.check.store import TIMEOUT_S
from ragsweep.check.summary import render_summary
from ragsweep.chunk.chunkers import ChunkTools, chunk_corpus
from ragsweep.config.schema import ChunkingConfig, CorpusConfig, EmbeddingConfig, GoldenConfig
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import load_golden
from ragsweep.index.chunk_tokens import chunk_tokenizer
from tests.cli.test_project import REPO, ragsweep, write
from tests.st_support import needs_st

DEMO_CORPUS = REPO / "demo" / "corpus"
GOOD_CASE = {
    "id": "ok",
    "question": "Refunds?",
    "evidence": [{"doc": "billing/refunds.md", "start": 0, "end": 10}],
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project folder as the current directory, MLflow variables unset."""
    monkeypatch.chdir(tmp_path)
    for name in ("RAGSWEEP_ROOT", "RAGSWEEP_CONF_DIR", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def messages(overrides: list[str]) -> list[str]:
    return [str(p) for p in run_checks(overrides).problems]


def problem_lines(stderr: str) -> list[str]:
    """The report's lines with each problem joined back onto one line (the terminal report
    continues a long problem on lines indented four columns)."""
    lines: list[str] = []
    for line in stderr.splitlines():
        if line.startswith("    ") and lines:
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return lines


def test_every_golden_problem_is_listed_with_its_line(tmp_path: Path) -> None:
    golden = tmp_path / "golden.jsonl"
    rows = [
        json.dumps(GOOD_CASE),
        json.dumps({"id": "a", "question": "?", "evidense": []}),
        "{not json",
        "",
        json.dumps({**GOOD_CASE, "id": "b", "evidence": [{"doc": "billing/refund.md", "end": 5}]}),
        json.dumps({**GOOD_CASE, "id": "c", "answerable": False}),
        json.dumps({**GOOD_CASE, "question": "again"}),
    ]
    golden.write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = ragsweep("check", f"golden.path={golden}", "tracking=off", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = problem_lines(out.stderr)
    assert lines[0] == "ragsweep check: 5 problem(s); nothing was run"
    expected = [
        f"{golden}:2: case 'a': unknown field 'evidense' (allowed: ",
        f"{golden}:3: invalid JSON (",
        f"{golden}:5: case 'b': evidence[0]: unknown doc 'billing/refund.md' (not in corpus "
        f"{DEMO_CORPUS}); did you mean 'billing/refunds.md'?",
        f'{golden}:6: case \'c\': "answerable": false must not carry "evidence"',
        f"{golden}:7: case 'ok': duplicate id (first defined on line 1)",
    ]
    assert len(lines) == 1 + len(expected)
    for line, start in zip(lines[1:], expected, strict=True):
        assert line.strip().startswith(start), line
    assert "did you mean 'evidence'?" in lines[1]


def test_bad_overrides_are_all_reported_with_a_suggestion(project: Path) -> None:
    found = messages(["chunking=headng", "chunking.sise=3", "embeding.model=x", "eval.ks=[5,1]"])
    assert found == [
        "command line: chunking=headng: no option 'headng' in config group chunking (options: "
        "fixed, heading, paragraph, recursive, semantic, sentence); did you mean 'heading'?",
        "command line: chunking.sise=3: chunking.sise is not a config key (keys of chunking: "
        "mode, size, overlap, heading_prefix, title_prefix, unit, tokenizer); did you mean 'size'?",
        "command line: embeding.model=x: embeding.model is not a config key (keys of the "
        "config: paths, corpus, golden, preprocess, chunking, embedding, retrieval, eval, "
        "tracking, cache, judge, rerank, sweep, verbose); did you mean 'embedding'?",
        "command line: eval.ks=[5, 1] must be strictly increasing",
    ]


def test_a_config_file_problem_names_the_file_and_line(project: Path) -> None:
    odd = write(
        project / "conf" / "chunking" / "odd.yaml",
        "# size and overlap\nmode: fixed\nsize: 300\noverlap: 300\n",
    )
    assert messages(["chunking=odd", "retrieval.top_k=0"]) == [
        f"{odd}:4: chunking.overlap=300 must satisfy 0 <= overlap < chunking.size (=300)",
        "command line: retrieval.top_k=0 must be > 0",
    ]


def test_every_sweep_value_is_checked_on_the_baseline(project: Path) -> None:
    sweep = write(
        project / "sweeps" / "bad.yaml",
        "baseline:\n  chunking: heading\naxes:\n"
        "  - chunking.size: [400, 0]\n"
        "  - preprocess: [none, nfkx]\n"
        "  - retrieval.top_k: [10, 20]\n",
    )
    assert messages(["sweep=bad"]) == [
        f"{sweep}:4: axis 1 (chunking.size) value 0: chunking.size=0 must be > 0",
        f"{sweep}:5: axis 2 (preprocess): no option nfkx in config group preprocess "
        "(options: nfkc, nfkc_synonyms, none); did you mean 'nfkc'?",
    ]
    assert messages(["sweep=chunkin"])[0].endswith(
        "(sweeps: access, bad, chunking, chunking_search, grid_small, retrieval); "
        "did you mean 'chunking'?"
    )


def test_an_unreachable_tracking_server_is_reported_within_the_timeout(project: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    found = messages([f"tracking.uri=http://127.0.0.1:{port}"])
    assert time.monotonic() - started < 30 + 2 * TIMEOUT_S
    assert found == [
        f"tracking: http://127.0.0.1:{port}: no tracking server answered within "
        f"{TIMEOUT_S:g} s (ConnectionError); start it, or set tracking.uri / MLFLOW_TRACKING_URI"
    ]
    broken = write(project / "broken.db", "not a database\n" * 100)
    assert messages([f"tracking.uri=sqlite:///{broken}"]) == [
        f"tracking: {broken} is not a usable SQLite database (file is not a database)"
    ]


def test_corpus_problems_and_split_problems(project: Path) -> None:
    missing = project / "nowhere"
    golden = REPO / "demo" / "golden.jsonl"
    assert messages([f"corpus.path={missing}"]) == [
        f"corpus.path={missing} does not exist",
        f"{golden}: evidence and scopes not checked: the corpus could not be read (see above)",
    ]
    holdout_only = project / "golden.jsonl"
    holdout_only.write_text(json.dumps({**GOOD_CASE, "split": "holdout"}) + "\n", "utf-8")
    assert messages([f"golden.path={holdout_only}"]) == [
        f"eval.split: golden set {holdout_only} has no cases in split 'tuning'"
    ]


def test_a_clean_check_prints_the_summary_and_writes_nothing(tmp_path: Path) -> None:
    out = ragsweep(
        "check",
        "sweep=chunking",
        "chunking.size=600",
        cwd=tmp_path,
        MLFLOW_TRACKING_URI="",
        COLUMNS="200",  # a wide terminal: long paths stay on their line
    )
    assert out.returncode == 0, out.stderr
    assert list(tmp_path.iterdir()) == []
    corpus = load_corpus(CorpusConfig(path=str(DEMO_CORPUS)))
    golden = load_golden(GoldenConfig(path=str(REPO / "demo" / "golden.jsonl")), corpus)
    lines = out.stdout.splitlines()
    assert lines[0] == "ragsweep check: no problems found; nothing was run"
    assert f"corpus    {len(corpus)} documents, {corpus.n_chars:,} characters" in out.stdout
    counts = Counter((c.type, c.split) for c in golden.cases)
    for kind in golden.types:
        row = next(line for line in lines if line.split()[:1] == [kind])
        assert row.split()[1:] == [str(counts[kind, "tuning"]), str(counts[kind, "holdout"])]
    this_run = ChunkingConfig(mode="fixed", size=600, overlap=100)
    (chunks,) = [line for line in lines if "(this run)" in line]
    assert chunks.split()[-1] == f"{len(chunk_corpus(corpus, this_run)):,}"
    # the sweep's values on its baseline, with the command line's chunking.size
    heading = next(line for line in lines if line.strip().startswith("heading size=600"))
    expected = len(chunk_corpus(corpus, ChunkingConfig(mode="heading", size=600, overlap=100)))
    assert heading.split()[-1] == f"{expected:,}"
    assert f"tracking  {tmp_path}/outputs/mlflow.db will be created (first run)" in out.stdout


def test_the_sweepers_own_checks_each_problem_once_on_its_line(project: Path) -> None:
    sweep = write(
        project / "sweeps" / "multi.yaml",
        "baseline:\n  chunking.overlap: 50\naxes:\n"
        "  - chunking: [fixed, heading]\n"
        "  - embedding: [bm25, hybrid]\n"
        "objective: recall_at_2000c\n",
    )
    found = messages(["sweep=multi", "chunking.sizee=3"])
    assert found[0].startswith("command line: chunking.sizee=3: chunking.sizee is not a config")
    assert [m for m in found if "sizee" in m] == found[:1]  # the typo once, the command line's
    # the chunking options set other sizes: refused as the sweeper refuses it, on its line;
    # the retriever options differ only in their own keys: one factor, nothing reported
    assert found[1:] == [
        f"{sweep}:4: axis 1 (chunking) is not one factor: its values also differ in "
        "chunking.size:\n    chunking.size = 800 for fixed; 1200 for heading\n"
        "Hold chunking.size in the baseline (sweep them as axes of their own), or keep the "
        "values as they are with the long form {values: {key: [values]}, allow_multi_factor: "
        "true} (docs/sweeps.md)"
    ]
    write(
        project / "sweeps" / "typo.yaml",
        "axes:\n  - chunking.size: [400]\ndecision: best\nobjetive: mrr\n",
    )
    assert messages(["sweep=typo"])[0].startswith(
        f"{project / 'sweeps' / 'typo.yaml'}:4: sweep.objetive"
    )


def test_inits_sweep_file_passes_check(tmp_path: Path) -> None:
    assert ragsweep("init", "proj", cwd=tmp_path).returncode == 0
    out = ragsweep("check", "sweep=project", "tracking=off", cwd=tmp_path / "proj")
    assert out.returncode == 0, out.stderr
    assert "objective recall_at_2000c" in " ".join(out.stdout.split())


def test_a_corpus_problem_does_not_hide_the_golden_sets_own(project: Path) -> None:
    golden = project / "golden.jsonl"
    rows = [json.dumps(GOOD_CASE), "{not json", json.dumps({**GOOD_CASE, "qestion": "?"})]
    golden.write_text("\n".join([*rows, json.dumps(GOOD_CASE)]) + "\n", encoding="utf-8")
    corpus = write(project / "conf" / "corpus" / "mine.yaml", "name: mine\npth: docs\n")
    found = messages(["corpus=mine", f"golden.path={golden}"])
    assert found[0].startswith(f"{corpus}:2: corpus.pth is not a"), found[0]
    assert found[1].startswith(f"{golden}:2: invalid JSON (")
    assert found[2].startswith(f"{golden}:3: case 'ok': unknown field 'qestion'")
    assert found[3] == f"{golden}:4: case 'ok': duplicate id (first defined on line 1)"
    assert found[4].endswith(
        ": evidence and scopes not checked: the corpus could not be read (see above)"
    )
    assert len(found) == 5


def test_an_invalid_baseline_is_blamed_on_the_entry_that_breaks_it(project: Path) -> None:
    # embedding.options.alpha exists only once embedding=hybrid (the entry above it) is
    # composed: the entry to blame is the bad chunking.size, not alpha
    sweep = write(
        project / "sweeps" / "base.yaml",
        "baseline:\n  embedding: hybrid\n  embedding.options.alpha: 0.3\n"
        "  chunking.size: 0\naxes:\n  - retrieval.top_k: [10, 20]\n",
    )
    found = messages(["sweep=base"])
    assert found == [f"{sweep}:4: baseline chunking.size: chunking.size=0 must be > 0"], found


def test_check_takes_a_runs_command_line_as_typed(tmp_path: Path) -> None:
    out = ragsweep("check", "-m", "sweep=chunking", "-v", "tracking=off", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "detectable difference (80% power" in out.stdout


def test_semantic_chunks_are_counted_at_run_time(project: Path) -> None:
    found = run_checks(["chunking=semantic", "tracking=off"])
    assert found.problems == []
    assert found.facts.corpus is not None and found.facts.config is not None
    counts = chunk_counts(found.facts.corpus, found.facts.config, None)
    assert [count for _, count in counts] == [None]
    found.facts.chunks = counts
    assert "counted at run time" in render_summary(found.facts)


@needs_st
def test_chunks_in_tokens_are_counted_in_tokens(project: Path) -> None:
    write(project / "sweeps" / "tok.yaml", "axes:\n  - chunking.size: [40, 80]\n")
    overrides = ["chunking.unit=tokens", "chunking.overlap=0", "chunking.size=60"]
    found = run_checks(["sweep=tok", "tracking=off", *overrides])
    assert found.problems == []
    assert found.facts.corpus is not None and found.facts.config is not None
    counts = chunk_counts(found.facts.corpus, found.facts.config, found.facts.sweep)
    corpus = found.facts.corpus
    run = found.facts.config.resolved.cfg.chunking  # type: ignore[union-attr]
    tools = ChunkTools(chunk_tokenizer(run, EmbeddingConfig("bm25")))
    sizes = [replace(run, size=size) for size in (60, 40, 80)]
    expected = [len(chunk_corpus(corpus, chunking, tools)) for chunking in sizes]
    assert [count for _, count in counts] == expected
    assert expected[0] != len(chunk_corpus(corpus, replace(run, unit="chars")))


def test_an_older_corpus_file_is_told_which_parser_line_to_add(project: Path) -> None:
    old = f"name: old\npath: {DEMO_CORPUS}\nextensions: [.md, .txt]\nfollow_external_links: false\n"
    write(project / "conf" / "corpus" / "old.yaml", old)  # no parser keys: made before them
    write(project / "sweeps" / "parsers.yaml", "axes:\n  - corpus.pdf_parser: [pypdf, off]\n")
    found = messages(["corpus=old", "sweep=parsers", "tracking=off"])
    assert len(found) == 1 and found[0].endswith(
        "axis 1 (corpus.pdf_parser): the corpus config has no pdf_parser (a project made "
        "before parsers could be swept): add `pdf_parser: pypdf` to conf/corpus/old.yaml"
    ), found
