"""Symbolic links in a corpus directory (issue 12, item 9): links to outside the corpus
are read only with ``corpus.follow_external_links=true``; otherwise each is an error naming
it, before any work."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ragsweep.config.schema import CorpusConfig
from ragsweep.core.errors import CorpusError
from ragsweep.data.corpus import load_corpus
from tests.reliability.conftest import run_command


@pytest.fixture
def linked_corpus(tmp_path: Path) -> tuple[Path, Path]:
    """``corpus/`` with a real file, an inside file link, an inside directory link, and
    links to a file and a directory outside it."""
    corpus, outside = tmp_path / "corpus", tmp_path / "outside"
    (corpus / "guides").mkdir(parents=True)
    (outside / "more").mkdir(parents=True)
    (corpus / "guides" / "billing.md").write_text("Refunds are issued within 14 days.\n")
    (outside / "private.md").write_text("The private salary table.\n")
    (outside / "more" / "extra.md").write_text("Extra document.\n")
    (outside / "more" / "back").symlink_to(corpus)  # a cycle once followed
    os.symlink("guides/billing.md", corpus / "alias.md")
    os.symlink("guides", corpus / "same-guides")
    return corpus, outside


def test_links_outside_the_corpus_are_an_error_naming_each(linked_corpus) -> None:
    corpus, outside = linked_corpus
    os.symlink(outside / "private.md", corpus / "private.md")
    os.symlink(outside / "more", corpus / "more")
    with pytest.raises(CorpusError) as info:
        load_corpus(CorpusConfig(path=str(corpus)))
    lines = str(info.value).splitlines()
    assert lines[0] == f"corpus.path={corpus}: 2 problems; fix them and run again:"
    assert lines[1] == (
        f"  {corpus / 'more'}: symbolic link to the directory {outside / 'more'}, outside the "
        "corpus; set corpus.follow_external_links=true to read it, or remove the link"
    )
    assert lines[2].startswith(f"  {corpus / 'private.md'}: symbolic link to the file ")


def test_links_inside_the_corpus_are_followed_for_files_only(linked_corpus) -> None:
    corpus, _ = linked_corpus
    ids = [d.id for d in load_corpus(CorpusConfig(path=str(corpus)))]
    assert ids == ["alias.md", "guides/billing.md"]  # same-guides/ is not read twice


def test_following_external_links_is_opt_in(linked_corpus) -> None:
    corpus, outside = linked_corpus
    os.symlink(outside / "private.md", corpus / "private.md")
    os.symlink(outside / "more", corpus / "more")
    loaded = load_corpus(CorpusConfig(path=str(corpus), follow_external_links=True))
    assert [d.id for d in loaded] == [
        "alias.md",
        "guides/billing.md",
        "more/extra.md",  # more/back leads back into the corpus: not read again
        "private.md",
    ]


def test_a_broken_link_to_a_document_is_an_error(linked_corpus) -> None:
    corpus, _ = linked_corpus
    os.symlink("gone.md", corpus / "gone.md")
    os.symlink("gone.png", corpus / "gone.png")  # not a document: ignored
    with pytest.raises(CorpusError, match=r"gone\.md: broken symbolic link \(to gone\.md\)"):
        load_corpus(CorpusConfig(path=str(corpus)))


def test_a_link_outside_fails_the_command_before_work_unless_allowed(
    tmp_path: Path, linked_corpus
) -> None:
    corpus, outside = linked_corpus
    os.symlink(outside / "private.md", corpus / "private.md")
    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        json.dumps(
            {
                "id": "q1",
                # words of every document: chunks.jsonl lists the chunks a case retrieved
                "question": "refunds in the private salary table?",
                "split": "tuning",
                "evidence": [{"doc": "guides/billing.md", "quote": "Refunds are issued"}],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    args = [
        f"paths.output_dir={tmp_path / 'out'}",
        f"corpus.path={corpus}",
        f"golden.path={golden}",
        "tracking.enabled=false",
        "chunking.size=100",
        "chunking.overlap=0",
    ]
    refused = run_command("ragsweep", *args, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert f"error: {corpus / 'private.md'}: symbolic link to the file" in refused.stderr
    assert "corpus.follow_external_links=true" in refused.stderr
    assert not (tmp_path / "out" / "cache").exists()

    allowed = run_command("ragsweep", *args, "corpus.follow_external_links=true", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    (manifest,) = (tmp_path / "out").glob("runs/*/*/chunks.jsonl")
    docs = {json.loads(line)["doc"] for line in manifest.read_text().splitlines()}
    assert docs == {"alias.md", "guides/billing.md", "private.md"}
