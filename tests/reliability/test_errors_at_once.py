"""All problems in one pass (issue 12, item 8): a golden file with many bad lines lists
them all (up to a cap, then a count), each with file:line and case id, before any work;
corpus JSONL duplicates name both lines."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.core.errors import MAX_REPORTED_PROBLEMS, CorpusError, GoldenError
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import load_golden
from tests.reliability.conftest import run_command
from tests.run.test_pipeline import project_overrides

GOOD = {
    "id": "ok",
    "question": "How long do refunds take?",
    "evidence": [{"doc": "billing.md", "quote": "Refunds are issued within 14 days"}],
}


def bad_line(i: int) -> str:
    """Line ``i`` of a broken golden file: a different kind of problem in turn."""
    kinds = [
        lambda: json.dumps({"id": f"c{i}", "question": "q", "evidense": []}),
        lambda: json.dumps(
            {"id": f"c{i}", "question": "q", "evidence": [{"doc": "nope.md", "quote": "x"}]}
        ),
        lambda: '{"id": "broken", "question": ',
        lambda: json.dumps({"id": f"c{i}", "question": "", "answerable": False}),
        lambda: json.dumps({"id": "ok", "question": "again", "answerable": False}),
    ]
    return kinds[i % len(kinds)]()


def write_broken_golden(path: Path, n_bad: int) -> Path:
    lines = [json.dumps(GOOD)] + [bad_line(i) for i in range(n_bad)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_two_thousand_bad_lines_are_reported_in_one_pass(
    tmp_path: Path, mini_project: Path
) -> None:
    corpus = load_corpus(CorpusConfig(path=str(mini_project / "corpus")))
    path = write_broken_golden(tmp_path / "golden.jsonl", 2000)
    started = time.perf_counter()
    with pytest.raises(GoldenError) as info:
        load_golden(GoldenConfig(path=str(path)), corpus)
    assert time.perf_counter() - started < 30
    lines = str(info.value).splitlines()
    assert lines[0] == (
        f"{path}: 2000 problems (the first {MAX_REPORTED_PROBLEMS} are listed); "
        "fix them and run again:"
    )
    listed = lines[1 : 1 + MAX_REPORTED_PROBLEMS]
    assert lines[-1] == f"  ... and {2000 - MAX_REPORTED_PROBLEMS} more"
    assert len(lines) == MAX_REPORTED_PROBLEMS + 2
    # every listed problem is file:line (+ case id where there is one), in file order
    assert listed[0] == (
        f"  {path}:2: case 'c0': unknown field 'evidense' (allowed: id, question, type, "
        "answerable, split, evidence, scope, principal, notes, metadata, origin, status); "
        "did you mean "
        "'evidence'?"
    )
    assert listed[1].startswith(f"  {path}:3: case 'c1': evidence[0]: unknown doc 'nope.md'")
    assert listed[2].startswith(f"  {path}:4: invalid JSON")
    assert listed[3] == f"  {path}:5: case 'c3': 'question' must be a non-empty string, got ''"
    assert listed[4] == f"  {path}:6: case 'ok': duplicate id (first defined on line 1)"
    numbers = [int(line.split(f"{path}:")[1].split(":")[0]) for line in listed]
    assert numbers == list(range(2, 2 + MAX_REPORTED_PROBLEMS))


def test_a_single_problem_keeps_the_one_line_message(tmp_path: Path, mini_project: Path) -> None:
    corpus = load_corpus(CorpusConfig(path=str(mini_project / "corpus")))
    path = write_broken_golden(tmp_path / "golden.jsonl", 1)
    with pytest.raises(GoldenError) as info:
        load_golden(GoldenConfig(path=str(path)), corpus)
    assert str(info.value) == (
        f"{path}:2: case 'c0': unknown field 'evidense' (allowed: id, question, type, "
        "answerable, split, evidence, scope, principal, notes, metadata, origin, status); "
        "did you mean "
        "'evidence'?"
    )


def test_invalid_utf8_on_several_lines_is_reported_per_line(
    tmp_path: Path, mini_project: Path
) -> None:
    corpus = load_corpus(CorpusConfig(path=str(mini_project / "corpus")))
    path = tmp_path / "golden.jsonl"
    good = json.dumps(GOOD).encode()
    path.write_bytes(
        good + b'\n{"id": "caf\xe9"}\n' + good.replace(b'"ok"', b'"ok2"') + b"\n\xff\n"
    )
    with pytest.raises(GoldenError) as info:
        load_golden(GoldenConfig(path=str(path)), corpus)
    message = str(info.value)
    assert f"{path}:2: not valid UTF-8 (byte 0xe9 at column 12)" in message
    assert f"{path}:4: not valid UTF-8 (byte 0xff at column 1)" in message
    assert "2 problems" in message


def test_many_bad_golden_lines_fail_the_command_before_any_work(
    tmp_path: Path, mini_project: Path
) -> None:
    golden = write_broken_golden(tmp_path / "golden.jsonl", 2000)
    out = run_command(
        "ragsweep",
        f"paths.output_dir={tmp_path / 'out'}",
        *project_overrides(mini_project),
        f"golden.path={golden}",
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.startswith(f"error: {golden}: 2000 problems")
    assert f"... and {2000 - MAX_REPORTED_PROBLEMS} more" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "out" / "cache").exists()  # nothing chunked or indexed
    assert not (tmp_path / "out" / "mlflow.db").exists()


def test_corpus_jsonl_duplicates_name_both_lines_and_all_problems_are_listed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "docs.jsonl"
    rows = [
        {"id": "a", "text": "one"},
        {"id": "b", "text": "two"},
        {"id": "a", "text": "three"},
        {"id": "c", "txt": "typo"},
        {"id": "b", "text": "four"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError) as info:
        load_corpus(CorpusConfig(path=str(path)))
    assert str(info.value).splitlines() == [
        f"{path}: 3 problems; fix them and run again:",
        f"  {path}:3: duplicate document id 'a' (first defined on line 1)",
        f"  {path}:4: unknown field(s) ['txt']",
        f"  {path}:5: duplicate document id 'b' (first defined on line 2)",
    ]
