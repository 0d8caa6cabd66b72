"""Files with CR-only (classic Mac) line endings (issue 12, item 7).

Such a file used to be one line: no heading was found, and ``heading_prefix=true``
prepended nothing useful while heading mode produced one section. A lone ``\\r`` now ends
a line, like ``\\n`` and ``\\r\\n``; the text itself is never rewritten, so chunk and
evidence offsets stay character offsets into the document exactly as read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsweep.chunk.chunkers import chunk_corpus, find_sections, indexed_text
from ragsweep.config.schema import ChunkingConfig, CorpusConfig, GoldenConfig
from ragsweep.core.errors import GoldenError
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import load_golden
from tests.reliability.conftest import run_command

LF = (
    "# Billing\n\n## Refunds\n\nRefunds are issued within 14 days.\n\n"
    "## Export\n\nExport all notes as a ZIP archive.\n"
)
ENDINGS = {"lf": "\n", "crlf": "\r\n", "cr": "\r"}


def handbook(ending: str) -> str:
    return LF.replace("\n", ending)


@pytest.fixture(params=list(ENDINGS))
def corpus_dir(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "billing.md").write_bytes(handbook(ENDINGS[request.param]).encode("utf-8"))
    return request.param, root


def test_headings_are_found_whatever_the_line_endings(corpus_dir: tuple[str, Path]) -> None:
    ending, root = corpus_dir
    corpus = load_corpus(CorpusConfig(path=str(root)))
    text = corpus.get("billing.md").text
    assert text == handbook(ENDINGS[ending])  # read as is: no newline translation
    paths = [s.heading_path for s in find_sections(text)]
    assert paths == [("Billing",), ("Billing", "Refunds"), ("Billing", "Export")]
    chunks = chunk_corpus(corpus, ChunkingConfig(mode="heading", size=60))
    for chunk in chunks:
        assert chunk.text == text[chunk.start : chunk.end]  # offsets into the text as read
    export = next(c for c in chunks if "ZIP" in c.text)
    assert export.heading_path == ("Billing", "Export")
    prefixed = indexed_text(export, heading_prefix=True)
    assert prefixed.startswith("Billing > Export\n\n")
    assert "Refunds are issued" not in prefixed  # not the whole document


def test_paragraph_mode_splits_cr_only_paragraphs(corpus_dir: tuple[str, Path]) -> None:
    _, root = corpus_dir
    corpus = load_corpus(CorpusConfig(path=str(root)))
    chunks = chunk_corpus(corpus, ChunkingConfig(mode="paragraph", size=40))
    assert [c.text.strip() for c in chunks][-1] == "Export all notes as a ZIP archive."
    assert len(chunks) >= 3


def test_evidence_offsets_index_the_cr_text(corpus_dir: tuple[str, Path], tmp_path: Path) -> None:
    ending, root = corpus_dir
    corpus = load_corpus(CorpusConfig(path=str(root)))
    text = corpus.get("billing.md").text
    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        json.dumps(
            {
                "id": "q1",
                "question": "refunds?",
                "evidence": [{"doc": "billing.md", "quote": "## Refunds\n\nRefunds are issued"}],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    (span,) = load_golden(GoldenConfig(path=str(golden)), corpus).cases[0].evidence
    quoted = text[span.start : span.end]
    assert quoted == f"## Refunds{ENDINGS[ending] * 2}Refunds are issued"


def test_cr_only_jsonl_files_have_lines(tmp_path: Path) -> None:
    docs = tmp_path / "docs.jsonl"
    rows = [{"id": "a", "text": handbook("\r")}, {"id": "b", "text": "second"}]
    docs.write_bytes("\r".join(json.dumps(r) for r in rows).encode("utf-8"))
    corpus = load_corpus(CorpusConfig(path=str(docs)))
    assert [d.id for d in corpus] == ["a", "b"]
    golden = tmp_path / "golden.jsonl"
    cases = [
        {"id": "q1", "question": "zip?", "evidence": [{"doc": "a", "quote": "ZIP archive"}]},
        {"id": "q2", "question": "?", "evidence": [{"doc": "b", "quoet": "second"}]},
    ]
    golden.write_bytes(("\r".join(json.dumps(c) for c in cases) + "\r").encode("utf-8"))
    with pytest.raises(GoldenError, match=r"golden\.jsonl:2: case 'q2': evidence\[0\] needs"):
        load_golden(GoldenConfig(path=str(golden)), corpus)


def test_cr_only_corpus_end_to_end_heading_prefix(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "billing.md").write_bytes(handbook("\r").encode("utf-8"))
    golden = tmp_path / "golden.jsonl"
    cases = [
        {
            "id": "q1",
            "question": "How do I export my notes?",
            "split": "tuning",
            "evidence": [{"doc": "billing.md", "quote": "Export all notes as a ZIP archive."}],
        },
        {  # chunks.jsonl lists the retrieved chunks: this case retrieves the first one
            "id": "q2",
            "question": "When are refunds issued?",
            "split": "tuning",
            "evidence": [{"doc": "billing.md", "quote": "Refunds are issued within 14 days."}],
        },
    ]
    golden.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    out = run_command(
        "ragsweep",
        f"paths.output_dir={tmp_path / 'out'}",
        f"corpus.path={root}",
        f"golden.path={golden}",
        "tracking.enabled=false",
        "chunking=heading",
        "chunking.size=60",
        "chunking.overlap=0",
        "chunking.heading_prefix=true",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (manifest,) = (tmp_path / "out").glob("runs/*/*/chunks.jsonl")
    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    assert [r["heading_path"] for r in rows] == [["Billing"], ["Billing", "Export"]]
    (cases_file,) = (tmp_path / "out").glob("runs/*/*/cases.jsonl")
    case, _ = [json.loads(line) for line in cases_file.read_text(encoding="utf-8").splitlines()]
    assert case["id"] == "q1" and case["metrics"]["hit_at_1"] == 1.0
