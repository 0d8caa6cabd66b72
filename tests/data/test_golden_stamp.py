"""``ragsweep-golden stamp``: hand-written cases get their evidence documents' digests, so
``ragsweep label`` flags them once a document changes; nothing else in the file moves."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest

from ragsweep.cli.golden import main as golden_main
from ragsweep.cli.label_state import LabelProject, state
from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden_file import read_golden_file, save_case, text_digest
from ragsweep.data.golden_stamp import (
    ALREADY,
    NOT_AN_OBJECT,
    PROBLEM,
    SKIPPED,
    STAMPED,
    stamp_cases,
)

TEXT = "Intro.\n\nBackups run nightly at two.\n"
LINES = [
    {"id": "quote", "question": "When?", "evidence": [{"doc": "a.md", "quote": "run nightly"}]},
    {"id": "offsets", "question": "What?", "evidence": [{"doc": "a.md", "start": 0, "end": 6}]},
    {
        "id": "labelled",
        "question": "Which?",
        "evidence": [{"doc": "a.md", "quote": "Intro."}],
        "metadata": {"doc_digests": {"a.md": "0123456789abcdef"}},
    },
    {
        "id": "draft",
        "question": "Why?",
        "status": "draft",
        "evidence": [{"doc": "a.md", "quote": "x"}],
    },
    {"id": "gone", "question": "Where?", "evidence": [{"doc": "missing.md", "quote": "x"}]},
    {"id": "none", "question": "Pony?", "answerable": False},
]


def _project(tmp_path: Path, text: str) -> LabelProject:
    (tmp_path / "corpus").mkdir(exist_ok=True)
    (tmp_path / "corpus" / "a.md").write_text(text, encoding="utf-8")
    corpus = load_corpus(CorpusConfig(path=str(tmp_path / "corpus")))
    return LabelProject(corpus, GoldenConfig(path=str(tmp_path / "golden.jsonl")))


def test_stamped_hand_written_cases_are_flagged_when_their_document_changes(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path, TEXT)
    original = [json.dumps(line) for line in LINES]
    project.golden_path.write_text("\n".join(original) + "\n", encoding="utf-8")

    outcome = stamp_cases(project.corpus, project.golden)

    assert outcome == {STAMPED: 2, ALREADY: 1, SKIPPED: 2, PROBLEM: 1}
    lines = project.golden_path.read_text(encoding="utf-8").splitlines()
    assert lines[2:] == original[2:]  # every line not stamped is kept byte for byte
    for stamped in lines[:2]:
        assert json.loads(stamped)["metadata"] == {"doc_digests": {"a.md": text_digest(TEXT)}}
    assert stamp_cases(project.corpus, project.golden)[STAMPED] == 0  # twice: no change

    changed = _project(tmp_path, TEXT.replace("Intro.", "Intro, rewritten."))
    views = {v["id"]: v for v in state(changed)["golden"]["cases"]}
    assert views["quote"]["changed"] == ["a.md"] and views["offsets"]["changed"] == ["a.md"]


def test_stamp_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = _project(tmp_path, TEXT)
    project.golden_path.write_text(json.dumps(LINES[0]) + "\n", encoding="utf-8")
    golden_main(["stamp", str(project.golden_path), "--corpus", str(tmp_path / "corpus")])
    assert capsys.readouterr().out == f"{project.golden_path}: 1 {STAMPED}\n"


def test_null_metadata_is_none_and_other_values_are_counted_apart(tmp_path: Path) -> None:
    project = _project(tmp_path, TEXT)
    cases = [{**LINES[0], "id": "null", "metadata": None}, {**LINES[0], "metadata": "x"}]
    project.golden_path.write_text("".join(json.dumps(c) + "\n" for c in cases), "utf-8")
    assert stamp_cases(project.corpus, project.golden) == {STAMPED: 1, NOT_AN_OBJECT: 1}
    stamped = json.loads(project.golden_path.read_text("utf-8").splitlines()[0])
    assert stamped["metadata"] == {"doc_digests": {"a.md": text_digest(TEXT)}}


def test_a_crlf_file_with_a_bom_keeps_both(tmp_path: Path) -> None:
    project = _project(tmp_path, TEXT)
    lines = [json.dumps(line).encode() + b"\r\n" for line in LINES]
    project.golden_path.write_bytes(codecs.BOM_UTF8 + b"".join(lines))

    assert stamp_cases(project.corpus, project.golden)[STAMPED] == 2

    data = project.golden_path.read_bytes()
    assert data.startswith(codecs.BOM_UTF8)
    written = data.removeprefix(codecs.BOM_UTF8).split(b"\n")
    assert written[2:-1] == [line.removesuffix(b"\n") for line in lines[2:]]
    assert all(line.endswith(b"\r") for line in written[:-1]) and written[-1] == b""
    assert json.loads(written[0])["metadata"]["doc_digests"] == {"a.md": text_digest(TEXT)}
    digest = read_golden_file(project.golden_path).digest
    new = {"id": "new", "question": "?", "answerable": False}
    save_case(project.golden_path, digest, new, None)
    assert project.golden_path.read_bytes().endswith(b'"answerable": false}\r\n')
