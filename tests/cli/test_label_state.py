"""What ``ragsweep label`` checks and writes, without a browser (tests/browser drives the
page): a selection as a quote with its occurrence, a changed document flagged, an ambiguous
quote listed with its matches, the stats of ``ragsweep-golden stats``."""

from __future__ import annotations

from pathlib import Path

from ragsweep.cli.label_state import LabelProject, labelled_record, state
from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden_file import evidence_item, save_case, text_digest

TEXT = "Intro.\n\nBackups run nightly.\n\nMore.\n\nBackups run nightly.\n"


def _project(tmp_path: Path, text: str = TEXT) -> LabelProject:
    (tmp_path / "corpus").mkdir(exist_ok=True)
    (tmp_path / "corpus" / "doc.md").write_text(text, encoding="utf-8")
    corpus = load_corpus(CorpusConfig(path=str(tmp_path / "corpus")))
    return LabelProject(corpus, GoldenConfig(path=str(tmp_path / "golden.jsonl")))


def test_selection_becomes_a_quote_with_its_occurrence(tmp_path: Path) -> None:
    corpus = _project(tmp_path).corpus
    second = TEXT.rindex("Backups")
    assert evidence_item(corpus, "doc.md", second - 2, second + 20) == {
        "doc": "doc.md",
        "quote": "Backups run nightly.",
        "occurrence": 2,
    }
    assert evidence_item(corpus, "doc.md", 0, 6) == {"doc": "doc.md", "quote": "Intro."}


def test_changed_document_and_ambiguous_quote_are_flagged(tmp_path: Path) -> None:
    project = _project(tmp_path)
    form = {"question": "When?", "spans": [{"doc": "doc.md", "start": 0, "end": 6}]}
    record = labelled_record(project.corpus, form, [])
    assert record["id"] == "q-001"
    assert record["metadata"]["doc_digests"] == {"doc.md": text_digest(TEXT)}
    digest = save_case(project.golden_path, "", record, None)
    ambiguous = {
        "id": "q-002",
        "question": "?",
        "evidence": [{"doc": "doc.md", "quote": "Backups run nightly."}],
    }
    save_case(project.golden_path, digest, ambiguous, None)
    views = state(project)["golden"]["cases"]
    assert views[0]["problem"] is None and views[0]["changed"] == []
    assert "occurs 2 times" in views[1]["problem"]
    assert [len(a["matches"]) for a in views[1]["ambiguous"]] == [2]
    assert state(project)["stats"]["checked"] == 1
    changed = _project(tmp_path, TEXT.replace("Intro.", "Intro!! Intro."))
    assert state(changed)["golden"]["cases"][0]["changed"] == ["doc.md"]
