"""Editing a golden file case by case (ragsweep.data.golden_file) and the draft/origin
fields of the loader: other lines kept byte for byte, an edit on disk never overwritten,
drafts never loaded, accepted drafts keep their origin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.core.errors import GoldenError
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import load_golden
from ragsweep.data.golden_file import (
    GoldenConflictError,
    delete_case,
    drafts_path,
    read_golden_file,
    save_case,
)

HAND_LINE = '{"id": "q1",  "question": "Kept as typed?", "answerable": false}  '


def test_save_replace_delete_keep_other_lines(tmp_path: Path) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_text(HAND_LINE + "\n\n", encoding="utf-8")
    digest = read_golden_file(path).digest
    digest = save_case(
        path, digest, {"id": "q2", "question": "Ünïcode?", "answerable": False}, None
    )
    lines = path.read_text("utf-8").split("\n")
    assert (
        lines[0] == HAND_LINE and lines[1] == "" and json.loads(lines[2])["question"] == "Ünïcode?"
    )
    digest = save_case(path, digest, {"id": "q2", "question": "Edited?", "answerable": False}, "q2")
    assert json.loads(path.read_text("utf-8").split("\n")[2])["question"] == "Edited?"
    with pytest.raises(GoldenError, match="exists already"):
        save_case(path, digest, {"id": "q1", "question": "x", "answerable": False}, "q2")
    digest = delete_case(path, digest, "q2")
    assert path.read_text("utf-8") == HAND_LINE + "\n\n"
    assert digest == read_golden_file(path).digest


def test_an_edit_on_disk_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "golden.jsonl"
    digest = save_case(path, "", {"id": "q1", "question": "a?", "answerable": False}, None)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(HAND_LINE.replace("q1", "typed") + "\n")
    edited = path.read_bytes()
    with pytest.raises(GoldenConflictError, match="changed on disk"):
        save_case(path, digest, {"id": "q9", "question": "b?", "answerable": False}, None)
    with pytest.raises(GoldenConflictError):
        delete_case(path, digest, "q1")
    assert path.read_bytes() == edited
    assert [p.name for p in tmp_path.iterdir()] == ["golden.jsonl"]  # no temporary left


def test_drafts_are_skipped_and_origin_is_kept(mini_project: Path) -> None:
    path = mini_project / "golden.jsonl"
    with path.open("a", encoding="utf-8") as handle:
        draft = {"id": "d1", "question": "Draft?", "answerable": False, "status": "draft"}
        accepted = {"id": "d2", "question": "Accepted?", "answerable": False, "origin": "drafted"}
        handle.write(json.dumps(draft) + "\n" + json.dumps(accepted) + "\n")
    corpus = load_corpus(CorpusConfig(path=str(mini_project / "corpus")))
    golden = load_golden(GoldenConfig(path=str(path)), corpus)
    origins = {c.id: c.origin for c in golden.cases}
    assert "d1" not in origins and origins["d2"] == "drafted" and origins["q1"] == "hand"
    assert drafts_path(path) == mini_project / "golden.drafts.jsonl"


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"origin": "robot"}, "'origin' must be one of hand, drafted"),
        ({"status": "done"}, "'status' may only be"),
    ],
)
def test_bad_origin_or_status(mini_project: Path, field: dict[str, str], message: str) -> None:
    path = mini_project / "golden.jsonl"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "x", "question": "?", "answerable": False, **field}) + "\n")
    corpus = load_corpus(CorpusConfig(path=str(mini_project / "corpus")))
    with pytest.raises(GoldenError, match=message):
        load_golden(GoldenConfig(path=str(path)), corpus)


def test_a_golden_file_that_cannot_be_written_is_a_named_error(tmp_path: Path) -> None:
    # root may write anywhere, so no chmod: a name the file system takes but whose
    # temporary sibling (14 characters longer) it refuses makes the write itself fail
    path = tmp_path / ("g" * 244 + ".jsonl")
    path.write_text(HAND_LINE + "\n", encoding="utf-8")
    digest = read_golden_file(path).digest
    case = {"id": "q2", "question": "b?", "answerable": False}
    with pytest.raises(GoldenError, match="cannot write the golden file") as raised:
        save_case(path, digest, case, None)
    assert str(path) in str(raised.value) and "writable" in str(raised.value)
    assert path.read_text(encoding="utf-8") == HAND_LINE + "\n"
