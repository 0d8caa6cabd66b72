"""HTML, PDF and DOCX corpus files: read by extension, headings kept, boilerplate dropped,
bad files warned about and skipped, evidence resolved on the parsed text. Fixtures are made
here (fpdf2 for PDF, python-docx for DOCX), never downloaded."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import docx
import pytest
from fpdf import FPDF

from ragsweep.cache.stage import StageCache
from ragsweep.chunk.chunkers import find_sections
from ragsweep.config.schema import CorpusConfig, GoldenConfig, result_fields
from ragsweep.core.errors import ConfigError, CorpusError, GoldenError
from ragsweep.data.corpus import corpus_files_digest, load_corpus
from ragsweep.data.golden import load_golden
from ragsweep.data.parsers import DocumentWarning, page_of
from ragsweep.eval.case_table import TableLayout, case_fields
from ragsweep.eval.scoring import CaseResult

HTML = (
    "<html><head><title>Billing help</title><style>.secret-style{color:red}</style>"
    "<script>var secretScript = 1;</script></head><body><nav>Home | Secret nav</nav>"
    "<h1>Billing</h1><p>Refunds take <b>5 days</b> to arrive.</p><h2>Invoices</h2>"
    "<p>Invoices are sent monthly.</p><footer>Secret footer</footer></body></html>"
)


def _pdf(path: Path, pages: list[str], encrypted: bool = False) -> None:
    pdf = FPDF()
    if encrypted:
        pdf.set_encryption(owner_password="owner", user_password="user")
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 10, text)
    pdf.output(str(path))


def _docx(path: Path) -> None:
    document = docx.Document()
    document.add_heading("Remote work", 1)
    document.add_paragraph("Staff may work remotely two days a week.")
    document.add_heading("Equipment", 2)
    document.add_paragraph("Laptops are provided by IT.")
    document.save(str(path))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "notes.md").write_text("# Notes\n\nPlain Markdown is read as before.\n")
    (root / "billing.html").write_text(HTML)
    _pdf(root / "terms.pdf", ["The first page is about invoices.", "Refunds are paid monthly."])
    _docx(root / "policy.docx")
    return root


def test_a_mixed_folder_is_read_with_no_configuration(folder: Path) -> None:
    corpus = load_corpus(CorpusConfig(path=str(folder)))
    assert list(corpus.ids) == ["billing.html", "notes.md", "policy.docx", "terms.pdf"]
    html = corpus.get("billing.html")
    assert html.title == "Billing help"
    assert "secret" not in html.text.lower()  # script, style, nav and footer dropped
    assert [s.heading_path for s in find_sections(html.text)] == [
        ("Billing",),
        ("Billing", "Invoices"),
    ]
    docx_text = corpus.get("policy.docx").text
    assert [s.heading_path for s in find_sections(docx_text)] == [
        ("Remote work",),
        ("Remote work", "Equipment"),
    ]
    pdf = corpus.get("terms.pdf")
    starts = pdf.metadata["page_starts"]
    assert pdf.text[starts[1] :].startswith("Refunds are paid monthly.")
    assert page_of(starts, pdf.text.index("Refunds")) == 2
    assert corpus.get("notes.md").metadata == {}


def test_bad_files_are_warned_about_by_name_and_the_rest_read(folder: Path) -> None:
    _pdf(folder / "scan.pdf", [""])
    _pdf(folder / "locked.pdf", ["secret"], encrypted=True)
    (folder / "broken.docx").write_bytes(b"PK\x03\x04not a zip")
    (folder / "empty.html").write_text("<html><script>x()</script><nav>menu</nav></html>")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        corpus = load_corpus(CorpusConfig(path=str(folder)))
    messages = sorted(str(w.message) for w in caught if w.category is DocumentWarning)
    assert len(messages) == 4
    assert "broken.docx: not a readable DOCX" in messages[0]
    assert "empty.html: no text found" in messages[1]
    assert "locked.pdf: encrypted PDF" in messages[2]
    assert "scan.pdf: no text found" in messages[3] and "OCR is out of scope" in messages[3]
    assert len(corpus) == 4


def test_a_pdf_read_as_text_is_named_a_pdf(tmp_path: Path) -> None:
    _pdf(tmp_path / "a.pdf", ["text"])
    cfg = CorpusConfig(path=str(tmp_path), extensions=(".pdf",), pdf_parser="off")
    with pytest.raises(CorpusError, match=r"a PDF file, not text.*corpus.pdf_parser") as info:
        load_corpus(cfg)
    assert "iconv" not in str(info.value)


def test_parser_settings_hash_only_when_changed(folder: Path) -> None:
    assert "pdf_parser" not in result_fields(CorpusConfig(path="x"))
    assert result_fields(CorpusConfig(path="x", pdf_parser="off"))["pdf_parser"] == "off"
    with pytest.raises(ConfigError, match=r"corpus.pdf_parser.*markdownify.*reads html"):
        load_corpus(CorpusConfig(path=str(folder), pdf_parser="markdownify"))
    off = load_corpus(CorpusConfig(path=str(folder), html_parser="off", docx_parser="off"))
    assert list(off.ids) == ["notes.md", "terms.pdf"]


def _golden(tmp_path: Path, evidence: dict[str, object]) -> GoldenConfig:
    path = tmp_path / "golden.jsonl"
    case = {"id": "c1", "question": "q?", "split": "tuning", "evidence": [evidence]}
    path.write_text(json.dumps(case) + "\n")
    return GoldenConfig(path=str(path))


def test_quotes_resolve_on_each_format_and_name_a_page(folder: Path, tmp_path: Path) -> None:
    corpus = load_corpus(CorpusConfig(path=str(folder)))
    for doc, quote in [
        ("billing.html", "Refunds take 5 days to arrive."),  # folded: ** markup ignored
        ("policy.docx", "Laptops are provided by IT."),
        ("terms.pdf", "Refunds are paid monthly."),
    ]:
        span = load_golden(_golden(tmp_path, {"doc": doc, "quote": quote}), corpus).cases[0]
        text = corpus.get(doc).text
        assert text[span.evidence[0].start : span.evidence[0].end].replace("**", "") == quote
    paged = {"doc": "terms.pdf", "quote": "invoices", "page": 2}
    with pytest.raises(GoldenError, match="not found"):
        load_golden(_golden(tmp_path, paged), corpus)
    on_page = load_golden(_golden(tmp_path, {**paged, "page": 1}), corpus).cases[0]
    assert on_page.evidence[0].start < corpus.get("terms.pdf").metadata["page_starts"][1]


def test_the_case_files_show_each_pdf_evidence_spans_page(folder: Path, tmp_path: Path) -> None:
    corpus = load_corpus(CorpusConfig(path=str(folder)))
    spans = [
        {"doc": "terms.pdf", "quote": "Refunds are paid"},
        {"doc": "notes.md", "quote": "Plain"},
    ]
    path = tmp_path / "golden.jsonl"
    path.write_text(json.dumps({"id": "c", "question": "q?", "split": "tuning", "evidence": spans}))
    case = load_golden(GoldenConfig(path=str(path)), corpus).cases[0]
    result = CaseResult("c", case.type, "tuning", True, {}, (), 0.0)
    fields = case_fields(case, result, corpus, None)
    assert [e.get("page") for e in fields["evidence"]] == [2, None]  # only a PDF has pages
    cell = TableLayout((1,), ()).row(fields, result)[
        TableLayout((1,), ()).columns.index("evidence")
    ]
    assert cell.startswith("terms.pdf@") and " p.2" in cell and cell.count(" p.") == 1


def test_offsets_under_another_parser_are_refused(folder: Path, tmp_path: Path) -> None:
    corpus = load_corpus(CorpusConfig(path=str(folder)))
    offsets = {"doc": "terms.pdf", "start": 0, "end": 9}
    with pytest.raises(GoldenError, match=r'parser none.*reads this document with pypdf.*"quote"'):
        load_golden(_golden(tmp_path, offsets), corpus)
    written = load_golden(_golden(tmp_path, {**offsets, "parser": "pypdf"}), corpus)
    assert written.cases[0].evidence[0].end == 9


def test_parsed_text_is_a_cached_stage(folder: Path, tmp_path: Path) -> None:
    cache = StageCache(tmp_path / "cache")
    first = load_corpus(CorpusConfig(path=str(folder)), cache)
    assert cache.stats.stage("parsed").misses == 3
    warm = StageCache(tmp_path / "cache")
    again = load_corpus(CorpusConfig(path=str(folder)), warm)
    assert (warm.stats.stage("parsed").hits, warm.stats.stage("parsed").misses) == (3, 0)
    assert again.content_hash() == first.content_hash()
    assert again.get("terms.pdf").metadata == first.get("terms.pdf").metadata
    assert again.get("billing.html").title == "Billing help"


def test_pypdfium2_is_a_second_pdf_parser(folder: Path, tmp_path: Path) -> None:
    pytest.importorskip("pypdfium2", reason="the parsers extra: pip install -e '.[parsers]'")
    _pdf(folder / "locked.pdf", ["secret"], encrypted=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        corpus = load_corpus(CorpusConfig(path=str(folder), pdf_parser="pypdfium2"))
    assert any("locked.pdf: encrypted PDF" in str(w.message) for w in caught)
    doc = corpus.get("terms.pdf")
    assert doc.metadata["parser"] == "pypdfium2" and len(doc.metadata["page_starts"]) == 2
    assert "\r" not in doc.text
    paged = {"doc": "terms.pdf", "quote": "Refunds are paid monthly.", "page": 2}
    span = load_golden(_golden(tmp_path, paged), corpus).cases[0].evidence[0]
    assert doc.text[span.start : span.end] == "Refunds are paid monthly."
    assert (
        result_fields(CorpusConfig(path="x", pdf_parser="pypdfium2"))["pdf_parser"] == "pypdfium2"
    )


def test_the_files_digest_is_the_same_for_every_parser_and_moves_with_any_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.md").write_text("# A\n\ntext", encoding="utf-8")
    (tmp_path / "b.pdf").write_bytes(b"%PDF-1.4 not really")
    (tmp_path / "notes.txt").write_text("not a corpus extension here", encoding="utf-8")
    cfg = CorpusConfig(path=str(tmp_path), extensions=(".md",))
    digest = corpus_files_digest(cfg)
    assert corpus_files_digest(dataclasses.replace(cfg, pdf_parser="off")) == digest
    (tmp_path / "notes.txt").write_text("edited", encoding="utf-8")
    assert corpus_files_digest(cfg) == digest  # not a corpus file
    (tmp_path / "b.pdf").write_bytes(b"%PDF-1.4 edited")  # read by no parser when off
    assert corpus_files_digest(dataclasses.replace(cfg, pdf_parser="off")) != digest
    edited = corpus_files_digest(cfg)
    (tmp_path / "_access.jsonl").write_text('{"id": "a.md", "groups": ["x"]}\n', "utf-8")
    assert corpus_files_digest(cfg) != edited


def _pdf_with_a_broken_page(path: Path) -> None:
    """A PDF whose page tree lists a second page that is not a page object."""
    stream = b"BT /F1 12 Tf 10 700 Td (Hello page one) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R 6 0 R] /Count 2 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"(not a page)",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path.write_bytes(out)


def test_a_page_pdfium_cannot_read_skips_the_pdf_with_a_warning(folder: Path) -> None:
    pytest.importorskip("pypdfium2", reason="the parsers extra: pip install -e '.[parsers]'")
    _pdf_with_a_broken_page(folder / "broken.pdf")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        corpus = load_corpus(CorpusConfig(path=str(folder), pdf_parser="pypdfium2"))
    assert "broken.pdf" not in corpus and "terms.pdf" in corpus
    assert any("broken.pdf: page 2 is not readable" in str(w.message) for w in caught)
