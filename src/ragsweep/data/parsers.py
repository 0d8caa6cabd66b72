"""Parsers: HTML, PDF and DOCX files turned into the text that is chunked and labelled.

Each parser is a function ``path -> Parsed`` registered in :data:`PARSERS` under its name;
``corpus.html_parser``, ``corpus.pdf_parser`` and ``corpus.docx_parser`` choose one per
format (docs/formats.md, "Documents other than text"). Headings come out as Markdown ``#``
headings, so ``chunking.mode=heading`` and ``heading_prefix`` work on every format. A file
that cannot give text (encrypted or image-only PDF, malformed DOCX, HTML without text)
raises :class:`UnreadableDocument` with what to do; the corpus reader turns it into a
:class:`DocumentWarning` and reads the other files.

Libraries: ``beautifulsoup4`` (MIT) and ``markdownify`` (MIT) for HTML, ``pypdf``
(BSD-3-Clause) for PDF, ``python-docx`` (MIT) for DOCX. Each is imported when a file of
its format is read.
"""

from __future__ import annotations

import functools
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ragsweep.core.errors import ConfigError
from ragsweep.core.registry import Registry

OFF = "off"
"""A ``corpus.*_parser`` value: files of that format are not read."""

HTML_PARSER = "markdownify"
PDF_PARSER = "pypdf"
DOCX_PARSER = "python-docx"

FORMAT_EXTENSIONS: dict[str, tuple[str, ...]] = {
    "html": (".html", ".htm"),
    "pdf": (".pdf",),
    "docx": (".docx",),
}
"""The file extensions of each parsed format (lower case)."""

BOILERPLATE_TAGS = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside")
"""HTML elements dropped before conversion: code, styling and navigation, not content."""

PAGE_SEPARATOR = "\n\n"
"""What joins the text of two PDF pages."""

_BLANK_RUNS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")


class UnreadableDocument(Exception):
    """A file of a parsed format that gives no text; the message says why and what to do."""


PAGE_STARTS = "page_starts"
"""Document metadata key: the offset each page's text starts at (``[i]`` is page ``i + 1``)."""


class DocumentWarning(UserWarning):
    """A corpus file skipped because it gives no text (the message names it)."""


@dataclass(frozen=True)
class Parsed:
    """The text of one file, its title if it has one, and for a PDF the offset at which
    each page's text starts (``page_starts[i]`` is page ``i + 1``)."""

    text: str
    title: str | None = None
    page_starts: tuple[int, ...] = ()

    def metadata(self, parser: str) -> dict[str, Any]:
        """The document metadata recorded for a parsed file."""
        pages = {PAGE_STARTS: list(self.page_starts)} if self.page_starts else {}
        return {"parser": parser, **pages}


@dataclass(frozen=True)
class Parser:
    """A registered parser: the format it reads, the library it uses, the function."""

    format: str
    library: str
    parse: Callable[[Path], Parsed]

    @property
    def version(self) -> str:
        """The library's installed version (part of what identifies parsed text)."""
        return _installed_version(self.library)


@functools.cache
def _installed_version(library: str) -> str:
    """Read once per process: the key of every parsed file asks for it ("not installed"
    for an optional library that is missing: its parser then says what to install)."""
    try:
        return version(library)
    except PackageNotFoundError:
        return "not installed"


PARSERS: Registry[Parser] = Registry("corpus parser")


def _tidy(text: str) -> str:
    """Runs of blank lines collapsed to one, surrounding whitespace dropped."""
    return _BLANK_RUNS.sub("\n\n", text).strip()


def _require_text(text: str, path: Path, what_to_do: str) -> str:
    if not text.strip():
        raise UnreadableDocument(f"{path}: no text found; {what_to_do}")
    return text


# ---------------------------------------------------------------------------- HTML


def parse_html(path: Path) -> Parsed:
    """HTML to Markdown: boilerplate elements dropped, headings as ATX ``#`` headings."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(path.read_bytes(), "html.parser")
    title_tag = soup.find("title")
    title = title_tag.get_text().strip() if title_tag is not None else None
    for element in soup.find_all(BOILERPLATE_TAGS):
        element.decompose()
    if title_tag is not None:
        title_tag.decompose()
    body = soup.find("body") or soup
    converter = MarkdownConverter(heading_style="ATX", strip=["a", "img"], bullets="-")
    text = _tidy(converter.convert_soup(body))
    _require_text(text, path, "the page holds only markup, scripts or navigation; remove it")
    return Parsed(text=text, title=title or None)


PARSERS.add(HTML_PARSER, Parser("html", "markdownify", parse_html))


# ---------------------------------------------------------------------------- PDF

_OCR = (
    "it may be a scanned (image-only) PDF: OCR is out of scope for ragsweep; run an OCR "
    "tool on it first (e.g. ocrmypdf) or remove it from the corpus"
)


def parse_pdf(path: Path) -> Parsed:
    """The text layer of each page (pypdf), pages joined by a blank line; the start
    offset of every page is kept."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocument(
                f"{path}: encrypted PDF; save a decrypted copy (e.g. qpdf --decrypt) and "
                "put that in the corpus"
            )
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        title = reader.metadata.title if reader.metadata else None
    except (PyPdfError, OSError, ValueError) as exc:
        raise UnreadableDocument(f"{path}: not a readable PDF ({exc}); re-export it") from None
    text, starts = _join_pages(pages)
    _require_text(text, path, _OCR)
    return Parsed(text=text, title=title or None, page_starts=starts)


def _join_pages(pages: list[str]) -> tuple[str, tuple[int, ...]]:
    starts: list[int] = []
    position = 0
    for index, page in enumerate(pages):
        if index:
            position += len(PAGE_SEPARATOR)
        starts.append(position)
        position += len(page)
    return PAGE_SEPARATOR.join(pages), tuple(starts)


def page_of(page_starts: tuple[int, ...] | list[int], offset: int) -> int:
    """The 1-based page holding ``offset``."""
    page = 1
    for index, start in enumerate(page_starts):
        if start <= offset:
            page = index + 1
    return page


PARSERS.add(PDF_PARSER, Parser("pdf", "pypdf", parse_pdf))

PDFIUM_PARSER = "pypdfium2"
"""``corpus.pdf_parser=pypdfium2``: PDFium (Chrome's PDF engine) through pypdfium2
(BSD-3-Clause / Apache-2.0), the ``parsers`` extra."""


def parse_pdf_pdfium(path: Path) -> Parsed:
    """The text layer of each page read by PDFium, pages joined by a blank line (line
    endings made LF); the start offset of every page is kept."""
    try:
        import pypdfium2 as pdfium
    except ImportError:
        raise ConfigError(
            "corpus.pdf_parser=pypdfium2 needs pypdfium2: pip install 'ragsweep[parsers]'"
        ) from None
    try:
        document = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        what = (
            "encrypted PDF; save a decrypted copy (e.g. qpdf --decrypt)"
            if "assword" in str(exc)
            else f"not a readable PDF ({exc}); re-export it"
        )
        raise UnreadableDocument(f"{path}: {what}") from None
    try:
        pages = _pdfium_pages(document, path, pdfium.PdfiumError)
        title = document.get_metadata_dict().get("Title")
    finally:
        document.close()
    text, starts = _join_pages(pages)
    _require_text(text, path, _OCR)
    return Parsed(text=text, title=title or None, page_starts=starts)


def _pdfium_pages(document: Any, path: Path, error: type[Exception]) -> list[str]:
    """The text of each page; UnreadableDocument naming the page PDFium cannot read
    (``error``: pypdfium2's PdfiumError)."""
    pages = []
    for number in range(len(document)):
        try:
            text = document[number].get_textpage().get_text_range()
        except error as exc:
            raise UnreadableDocument(
                f"{path}: page {number + 1} is not readable ({exc}); re-export the PDF"
            ) from None
        pages.append(str(text).replace("\r\n", "\n").strip())
    return pages


PARSERS.add(PDFIUM_PARSER, Parser("pdf", "pypdfium2", parse_pdf_pdfium))


# ---------------------------------------------------------------------------- DOCX

_HEADING_STYLE = re.compile(r"^Heading (\d)$")


def parse_docx(path: Path) -> Parsed:
    """Paragraphs and tables in document order; ``Title`` and ``Heading N`` paragraphs as
    ``#`` headings."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise UnreadableDocument(
            f"{path}: not a readable DOCX file ({exc}); open and save it again in a word processor"
        ) from None
    blocks = [_docx_block(item) for item in document.iter_inner_content()]
    text = _tidy("\n\n".join(b for b in blocks if b.strip()))
    _require_text(text, path, "the document is empty or holds only images")
    return Parsed(text=text, title=document.core_properties.title or None)


def _docx_block(item: Any) -> str:
    if not hasattr(item, "style"):  # a table: one line a row, cells joined by " | "
        return "\n".join(" | ".join(c.text.strip() for c in row.cells) for row in item.rows)
    style = item.style.name if item.style is not None else ""
    heading = _HEADING_STYLE.match(style or "")
    level = 1 if style == "Title" else int(heading.group(1)) if heading else 0
    return ("#" * level + " " if level and item.text.strip() else "") + item.text.strip()


PARSERS.add(DOCX_PARSER, Parser("docx", "python-docx", parse_docx))
