"""Tests for ragsweep.chunk.chunkers: span invariants, exact chunks per mode, heading detection."""

from __future__ import annotations

import bisect
import json
import random
from itertools import pairwise
from pathlib import Path

import pytest

from ragsweep.chunk import chunkers as chunking
from ragsweep.chunk import semantic as chunk_semantic
from ragsweep.chunk import tokens as chunk_tokens
from ragsweep.chunk.chunkers import (
    CHUNKER_SOURCE_DIGEST,
    CHUNKERS,
    Chunk,
    Section,
    chunk_corpus,
    chunk_document,
    find_sections,
    indexed_text,
)
from ragsweep.config.schema import ChunkingConfig
from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import sha256_file, sha256_parts
from ragsweep.data import spans as data_spans
from ragsweep.data.corpus import Corpus, Document

MODES = ("fixed", "paragraph", "heading")
SQUAD_DEV = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "data"
    / "squad-v2-dev-cs224n-half"
    / "dev-v2.0.json"
)


def chunks_of(text: str, mode: str, size: int, overlap: int = 0) -> list[Chunk]:
    return chunk_document(Document(id="doc", text=text), ChunkingConfig(mode, size, overlap))


def texts_and_paths(chunks: list[Chunk]) -> list[tuple[str, tuple[str, ...]]]:
    """(text, heading_path) of each chunk, the shape most exact expectations are written in."""
    return [(c.text, c.heading_path) for c in chunks]


def texts(chunks: list[Chunk]) -> list[str]:
    return [c.text for c in chunks]


def titles(text: str) -> list[tuple[str, ...]]:
    return [s.heading_path for s in find_sections(text)]


# ---------------------------------------------------------------------------- invariants


def assert_sections_tile(text: str, sections: list[Section]) -> None:
    """Sections cover the text in order with no gap or overlap."""
    if not text:
        assert sections == []
        return
    assert sections[0].start == 0
    assert sections[-1].end == len(text)
    for before, after in pairwise(sections):
        assert before.end == after.start
    for section in sections:
        assert section.start <= section.body_start <= section.end
        assert section.start < section.end


def assert_uncovered_is_whitespace(text: str, chunks: list[Chunk]) -> None:
    """Every non-whitespace character lies in at least one chunk."""
    covered_to = 0
    for chunk in sorted(chunks, key=lambda c: c.start):
        gap = text[covered_to : chunk.start]
        assert not gap.strip(), f"uncovered text at {covered_to}: {gap[:40]!r}"
        covered_to = max(covered_to, chunk.end)
    assert not text[covered_to:].strip(), f"uncovered tail at {covered_to}"


def assert_chunk_invariants(doc: Document, chunks: list[Chunk], cfg: ChunkingConfig) -> None:
    text = doc.text
    sections = find_sections(text)
    assert_sections_tile(text, sections)
    section_starts = [s.start for s in sections]
    for chunk in chunks:
        assert 0 <= chunk.start < chunk.end <= len(text)
        assert chunk.end - chunk.start <= cfg.size
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.text == chunk.text.strip(), f"untrimmed chunk {chunk.id}"
        assert chunk.doc == doc.id
        assert chunk.id == f"{doc.id}@{chunk.start}-{chunk.end}"
        containing = sections[bisect.bisect_right(section_starts, chunk.start) - 1]
        assert containing.start <= chunk.start < containing.end
        assert chunk.heading_path == containing.heading_path
    for before, after in pairwise(chunks):
        assert before.start <= after.start, "chunks out of offset order"
        assert not (before.start <= after.start and after.end <= before.end), (
            f"{after.id} lies inside the previous chunk {before.id}"
        )
    assert len({c.id for c in chunks}) == len(chunks)
    assert_uncovered_is_whitespace(text, chunks)


def reference_paragraphs(text: str) -> list[tuple[int, int]]:
    """(start, end) of each run of non-blank lines, without surrounding whitespace."""
    found: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    offset = 0
    for line in text.split("\n"):
        if line.strip():
            end = offset + len(line.rstrip())
            start = offset + len(line) - len(line.lstrip()) if current is None else current[0]
            current = (start, end)
        elif current is not None:
            found.append(current)
            current = None
        offset += len(line) + 1
    if current is not None:
        found.append(current)
    return found


WORDS = [
    *("alpha", "beta", "gamma", "delta", "refund", "invoice", "policy", "Settings"),
    *("click", "Save", "the", "of", "and", "café", "naïve", "ü"),
    *("返金", "請求書", "契約", "秘密保持", "データ", "東京"),
]


def random_line(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.08:
        return "#" * rng.randint(1, 6) + " " + " ".join(rng.choices(WORDS, k=rng.randint(1, 4)))
    if kind < 0.12:
        return f"{rng.randint(1, 9)}.{rng.randint(1, 9)} {rng.choice(['Scope', 'Terms', '範囲'])}"
    if kind < 0.15:
        return f"{rng.randint(1, 9)}. Open {rng.choice(WORDS)} and click Save."
    if kind < 0.18:
        return rng.choice(["===", "-----", "---", "```", "~~~", "# not a heading in code"])
    if kind < 0.21:
        return "x" * rng.randint(30, 300)  # a long token with no whitespace to break at
    if kind < 0.26:
        return rng.choice(["", " ", "\t", "\u3000", "   "])
    return " ".join(rng.choices(WORDS, k=rng.randint(1, 25)))


def random_text(seed: int) -> str:
    rng = random.Random(seed)
    lines: list[str] = []
    for _ in range(rng.randint(0, 60)):
        lines.append(random_line(rng))
        if rng.random() < 0.35:
            lines.append("")
    newline = "\r\n" if seed % 3 == 0 else "\n"
    return rng.choice(["", "  \n", "\n\n"]) + newline.join(lines) + rng.choice(["", "\n", " \n"])


RANDOM_TEXTS = [random_text(seed) for seed in range(30)]
EDGE_TEXTS = [
    "",
    "   \n\t\n  ",
    "x",
    "short text",
    "日本語のテキストです。第二文。",
    "a\r\n\r\nb\r\n",
    "# Only a heading",
    "## Billing\n### Refunds\n",
    "```\n# unclosed fence\n\n## still code",
]
CONFIGS = [(7, 3), (30, 27), (50, 0), (120, 40)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("size", "overlap"), CONFIGS)
def test_invariants_hold_on_random_and_edge_texts(mode: str, size: int, overlap: int) -> None:
    cfg = ChunkingConfig(mode=mode, size=size, overlap=overlap)
    for index, text in enumerate(RANDOM_TEXTS + EDGE_TEXTS):
        doc = Document(id=f"d{index}", text=text)
        chunks = chunk_document(doc, cfg)
        assert_chunk_invariants(doc, chunks, cfg)
        assert chunk_document(doc, cfg) == chunks, "chunking is not deterministic"


@pytest.mark.parametrize(("size", "overlap"), CONFIGS)
def test_fixed_chunks_are_trimmed_windows(size: int, overlap: int) -> None:
    step = size - overlap
    for text in RANDOM_TEXTS:
        for chunk in chunks_of(text, "fixed", size, overlap):
            # the latest window starting at or before the chunk must contain it
            assert chunk.end <= chunk.start // step * step + size


@pytest.mark.parametrize(("size", "overlap"), CONFIGS)
def test_paragraph_chunks_are_whole_paragraphs_or_windows_of_one(size: int, overlap: int) -> None:
    for text in RANDOM_TEXTS:
        paragraphs = reference_paragraphs(text)
        ends = {end for _, end in paragraphs}
        for chunk in chunks_of(text, "paragraph", size, overlap):
            start, end = next(p for p in paragraphs if p[0] <= chunk.start < p[1])
            if end - start > size:
                assert chunk.end <= end, "a window of a long paragraph crosses into the next"
            else:
                assert chunk.start == start and chunk.end in ends


@pytest.mark.parametrize("mode", MODES)
def test_size_one_chunks_are_the_non_whitespace_characters(mode: str) -> None:
    cfg = ChunkingConfig(mode=mode, size=1)
    for index, text in enumerate(RANDOM_TEXTS[:5] + EDGE_TEXTS):
        doc = Document(id=f"d{index}", text=text)
        chunks = chunk_document(doc, cfg)
        assert_chunk_invariants(doc, chunks, cfg)
        assert texts(chunks) == [char for char in text if not char.isspace()]


def test_empty_and_blank_documents_have_no_chunks() -> None:
    for mode in MODES:
        assert chunks_of("", mode, 10) == []
        assert chunks_of(" \n\t\r\n\u3000", mode, 10) == []
    assert find_sections("") == []


@pytest.mark.parametrize("mode", MODES)
def test_document_shorter_than_size_is_one_trimmed_chunk(mode: str) -> None:
    text = "\n  Alpha beta.\n\nGamma delta.  \n"
    [chunk] = chunks_of(text, mode, 800, 100)
    assert chunk.text == "Alpha beta.\n\nGamma delta."
    assert (chunk.start, chunk.end) == (3, 28)
    assert chunk.id == "doc@3-28"


# ---------------------------------------------------------------------------- fixed


def test_fixed_windows_step_by_size_minus_overlap() -> None:
    chunks = chunks_of("abcdefghij", "fixed", 4, 1)
    assert texts(chunks) == ["abcd", "defg", "ghij"]
    assert [(c.start, c.end) for c in chunks] == [(0, 4), (3, 7), (6, 10)]


def test_fixed_last_window_is_clipped_to_the_text() -> None:
    assert texts(chunks_of("abcdefghijk", "fixed", 4, 1)) == ["abcd", "defg", "ghij", "jk"]
    # the window at 8 would lie inside [6, 10): it is not emitted
    assert texts(chunks_of("abcdefghij", "fixed", 4, 2)) == ["abcd", "cdef", "efgh", "ghij"]


def test_fixed_windows_are_trimmed_and_redundant_ones_dropped() -> None:
    chunks = chunks_of("ab  cd  ef", "fixed", 4, 0)
    assert [(c.text, c.start, c.end) for c in chunks] == [
        ("ab", 0, 2),
        ("cd", 4, 6),
        ("ef", 8, 10),
    ]
    # the second window [3, 8) trims to "d", inside the first chunk
    assert [(c.start, c.end) for c in chunks_of("abcd    ", "fixed", 6, 3)] == [(0, 4)]


def test_fixed_counts_code_points_in_cjk_text() -> None:
    chunks = chunks_of("日本語のテキストです", "fixed", 5, 0)
    assert texts(chunks) == ["日本語のテ", "キストです"]
    assert [c.id for c in chunks] == ["doc@0-5", "doc@5-10"]


def test_fixed_chunks_carry_the_heading_path_at_their_start() -> None:
    text = "# A\naaaa\n## B\nbbbb"
    assert texts_and_paths(chunks_of(text, "fixed", 9, 0)) == [
        ("# A\naaaa", ("A",)),
        ("## B\nbbbb", ("A", "B")),
    ]


# ---------------------------------------------------------------------------- paragraph

PARAGRAPHS = "Alpha one.\n\nBeta two two.\n\n\n  \nGamma.\n\nDelta four four four."


def test_paragraph_packs_paragraphs_greedily() -> None:
    assert texts(chunks_of(PARAGRAPHS, "paragraph", 30)) == [
        "Alpha one.\n\nBeta two two.",
        "Gamma.\n\nDelta four four four.",
    ]
    assert texts(chunks_of(PARAGRAPHS, "paragraph", 12)) == [
        "Alpha one.",
        "Beta two two",
        ".",
        "Gamma.",
        "Delta four f",
        "our four.",
    ]


def test_paragraph_overlap_repeats_trailing_whole_paragraphs() -> None:
    chunks = chunks_of(PARAGRAPHS, "paragraph", 30, 15)
    assert texts(chunks) == [
        "Alpha one.\n\nBeta two two.",
        "Beta two two.\n\n\n  \nGamma.",
        "Gamma.\n\nDelta four four four.",
    ]
    assert [(c.start, c.end) for c in chunks] == [(0, 25), (12, 37), (31, 60)]


def test_paragraph_overlap_never_repeats_a_chunk() -> None:
    text = "Alpha one.\n\nBeta two two.\n\n" + "X" * 25
    # "Beta two two." fits in the overlap but cannot be packed with the next paragraph
    assert texts(chunks_of(text, "paragraph", 30, 15)) == [
        "Alpha one.\n\nBeta two two.",
        "X" * 25,
    ]
    # a one-paragraph overlap that lets each chunk reach one paragraph further
    assert texts(chunks_of("a\n\nb\n\nc", "paragraph", 4, 3)) == ["a\n\nb", "b\n\nc"]


def test_paragraph_longer_than_size_is_cut_into_windows() -> None:
    text = "Short.\n\nabcdefghijklmnopqrstuvwxyz\n\nEnd."
    assert texts(chunks_of(text, "paragraph", 10, 2)) == [
        "Short.",
        "abcdefghij",
        "ijklmnopqr",
        "qrstuvwxyz",
        "End.",
    ]


def test_paragraph_splits_on_crlf_blank_lines() -> None:
    text = "# Title\r\n\r\nFirst para.\r\nstill first.\r\n \r\nSecond para.\r\n"
    assert texts_and_paths(chunks_of(text, "paragraph", 25)) == [
        ("# Title", ("Title",)),
        ("First para.\r\nstill first.", ("Title",)),
        ("Second para.", ("Title",)),
    ]


# ---------------------------------------------------------------------------- heading


def test_heading_nested_atx_sections() -> None:
    text = (
        "Preface line.\n\n# Guide\nIntro.\n\n## Install\nRun it.\n\n### Linux ###\nUse apt.\n\n"
        "## Usage\nCall it.\n"
    )
    assert texts_and_paths(chunks_of(text, "heading", 100)) == [
        ("Preface line.", ()),
        ("# Guide\nIntro.", ("Guide",)),
        ("## Install\nRun it.", ("Guide", "Install")),
        ("### Linux ###\nUse apt.", ("Guide", "Install", "Linux")),
        ("## Usage\nCall it.", ("Guide", "Usage")),
    ]


def test_find_sections_offsets_and_body_start() -> None:
    text = "Intro\n# A\nbody\n## B"
    assert find_sections(text) == [
        Section(start=0, end=6, heading_path=(), body_start=0),
        Section(start=6, end=15, heading_path=("A",), body_start=10),
        Section(start=15, end=19, heading_path=("A", "B"), body_start=19),
    ]


def test_heading_setext_and_thematic_break() -> None:
    text = "Title\n=====\nIntro.\n\nPart\n----\nBody.\n\n---\n\nAfter break.\n"
    assert texts_and_paths(chunks_of(text, "heading", 100)) == [
        ("Title\n=====\nIntro.", ("Title",)),
        ("Part\n----\nBody.\n\n---\n\nAfter break.", ("Title", "Part")),
    ]


def test_heading_numbered_plain_text_headings() -> None:
    text = (
        "Terms of service\n\n1. Definitions\n\nWords mean things.\n\n1.1 Customer\n\nThe buyer.\n\n"
        "2. Confidentiality\n\nKeep secrets.\n\nSection 2.1 Termination\n\nEither party.\n\n"
        "Article 4\n\nFinal words.\n"
    )
    assert texts_and_paths(chunks_of(text, "heading", 200)) == [
        ("Terms of service", ()),
        ("1. Definitions\n\nWords mean things.", ("1. Definitions",)),
        ("1.1 Customer\n\nThe buyer.", ("1. Definitions", "1.1 Customer")),
        ("2. Confidentiality\n\nKeep secrets.", ("2. Confidentiality",)),
        (
            "Section 2.1 Termination\n\nEither party.",
            ("2. Confidentiality", "Section 2.1 Termination"),
        ),
        ("Article 4\n\nFinal words.", ("Article 4",)),
    ]


def test_heading_ignores_fenced_code() -> None:
    text = (
        "# Setup\n\n```bash\n# not a heading\necho hi\n```\n\n"
        "~~~\n## also not\n\nSection 9\n\n~~~\n\n"
        "## Next\ntext\n"
    )
    assert titles(text) == [("Setup",), ("Setup", "Next")]


def test_numbered_steps_and_sentences_are_not_headings() -> None:
    text = (
        "## Steps\n\n1. Open Settings and click Save.\n\n2. Choose a plan.\n\n"
        "1. Open Settings\n2. Choose plan\n3. Confirm\n\n"
        "1.5 million people\n\n2024 Results\n\n3. Next step:\n\n"
        "4. " + "Very long numbered line " * 4 + "\n\nEnd"
    )
    assert titles(text) == [("Steps",)]
    assert titles("Text\n3.1 Scope\n\nmore") == [()], "a heading must follow a blank line"
    assert titles("Text\n\n3.1 Scope\nmore") == [()], "a heading must precede a blank line"


def test_heading_section_longer_than_size_is_cut_into_windows() -> None:
    text = "# Big\nabcdefghijklmnopqrstuvwxyz\n# Small\nok"
    assert texts_and_paths(chunks_of(text, "heading", 20, 5)) == [
        ("# Big\nabcdefghijklmn", ("Big",)),
        ("jklmnopqrstuvwxyz", ("Big",)),
        ("# Small\nok", ("Small",)),
    ]


def test_heading_blank_body_is_merged_into_the_next_section() -> None:
    [chunk] = chunks_of("## Billing\n### Refunds\ntext", "heading", 100)
    assert (chunk.start, chunk.text) == (0, "## Billing\n### Refunds\ntext")
    assert chunk.heading_path == ("Billing",)


def test_heading_blank_body_merge_respects_size() -> None:
    text = "## Billing\n### Refunds\nRefund text."
    assert texts(chunks_of(text, "heading", 30)) == ["## Billing", "### Refunds\nRefund text."]
    # the heading nearest to the content stays with it
    chain = "# Guide\n## Billing\n### Refunds\nRefund text."
    assert texts(chunks_of(chain, "heading", 40)) == [
        "# Guide",
        "## Billing\n### Refunds\nRefund text.",
    ]


def test_heading_crlf_titles_and_chunks() -> None:
    text = "Title\r\n=====\r\nIntro.\r\n\r\n## Part 2 ##\r\nBody.\r\n"
    assert texts_and_paths(chunks_of(text, "heading", 100)) == [
        ("Title\r\n=====\r\nIntro.", ("Title",)),
        ("## Part 2 ##\r\nBody.", ("Title", "Part 2")),
    ]


def test_heading_cjk_article_headings() -> None:
    text = (
        "第1条 (目的)\n\n本契約は取引条件を定める。\n\n"
        "第2条 (秘密保持)\n\n当事者は秘密を保持する。\n"
    )
    assert texts_and_paths(chunks_of(text, "heading", 100)) == [
        ("第1条 (目的)\n\n本契約は取引条件を定める。", ("第1条 (目的)",)),
        ("第2条 (秘密保持)\n\n当事者は秘密を保持する。", ("第2条 (秘密保持)",)),
    ]


# ---------------------------------------------------------------------------- API


def test_indexed_text_prefixes_the_heading_path() -> None:
    nested = Chunk("d@0-4", "d", 0, 4, "body", ("Guide", "Billing"))
    top = Chunk("d@0-4", "d", 0, 4, "body", ())
    assert indexed_text(nested, heading_prefix=True) == "Guide > Billing\n\nbody"
    assert indexed_text(nested, heading_prefix=False) == "body"
    assert indexed_text(top, heading_prefix=True) == "body"


def test_unknown_mode_names_key_allowed_values_and_near_match() -> None:
    cfg = ChunkingConfig(mode="headings")
    with pytest.raises(ConfigError) as excinfo:
        chunk_document(Document(id="d", text="text"), cfg)
    message = str(excinfo.value)
    assert "chunking.mode" in message
    assert "fixed, heading, paragraph, recursive, semantic, sentence" in message
    assert "did you mean 'heading'" in message
    with pytest.raises(ConfigError, match=r"chunking\.mode"):
        chunk_corpus(Corpus(documents=(), source="empty"), cfg)
    assert CHUNKERS.names() == [
        "fixed",
        "heading",
        "paragraph",
        "recursive",
        "semantic",
        "sentence",
    ]


def test_chunk_corpus_keeps_corpus_then_offset_order() -> None:
    corpus = Corpus(
        documents=(Document("a.md", "one\n\ntwo"), Document("b.md", "three\n\nfour")),
        source="mem",
    )
    chunks = chunk_corpus(corpus, ChunkingConfig(mode="paragraph", size=5))
    assert [c.id for c in chunks] == ["a.md@0-3", "a.md@5-8", "b.md@0-5", "b.md@7-11"]


def test_chunker_digest_changes_when_the_chunker_source_is_edited(tmp_path: Path) -> None:
    """The digest covers the chunker, the span trimming it uses (ragsweep.data.spans), token
    windows and semantic breakpoints."""
    sources = [Path(m.__file__) for m in (chunking, data_spans, chunk_tokens, chunk_semantic)]

    def digest(files: list[Path]) -> str:
        return sha256_parts(sha256_file(file) for file in files)

    assert digest(sources) == CHUNKER_SOURCE_DIGEST  # same text, same digest
    for i, source in enumerate(sources):
        edited = tmp_path / f"edited_{i}.py"
        edited.write_bytes(source.read_bytes() + b"\n# an edit\n")
        assert digest([*sources[:i], edited, *sources[i + 1 :]]) != CHUNKER_SOURCE_DIGEST


# ---------------------------------------------------------------------------- real data


def squad_documents() -> list[Document]:
    if not SQUAD_DEV.is_file():
        pytest.skip(f"SQuAD dev data not found at {SQUAD_DEV}")
    articles = json.loads(SQUAD_DEV.read_text(encoding="utf-8"))["data"]
    return [
        Document(
            id=article["title"],
            text="\n\n".join(p["context"] for p in article["paragraphs"]),
        )
        for article in articles
    ]


@pytest.mark.parametrize("mode", MODES)
def test_invariants_hold_on_squad_articles(mode: str) -> None:
    cfg = ChunkingConfig(mode=mode, size=800, overlap=100)
    documents = squad_documents()
    corpus = Corpus(documents=tuple(documents), source=str(SQUAD_DEV))
    chunks = chunk_corpus(corpus, cfg)
    for doc in documents:
        assert_chunk_invariants(doc, [c for c in chunks if c.doc == doc.id], cfg)
    position = {doc.id: index for index, doc in enumerate(documents)}
    order = [(position[c.doc], c.start) for c in chunks]
    assert order == sorted(order)
