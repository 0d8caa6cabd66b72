"""Corpus loading: a directory of text/Markdown (and HTML, PDF, DOCX) files or a JSONL
file of documents. HTML, PDF and DOCX files are read by their parser
(:mod:`ragsweep.data.parsers`); a file that gives no text is a warning, not an error.

Document ids are stable: the POSIX path relative to the corpus directory, or the ``id``
field of a JSONL line. Text is kept exactly as read (UTF-8, newlines untouched, CR-only
included) because evidence spans and chunk offsets are character offsets into it.
Symbolic links to outside the corpus directory are read only with
``corpus.follow_external_links=true``.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import json
import operator
import os
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ragsweep.cache.stage import StageCache
from ragsweep.config.schema import CorpusConfig
from ragsweep.core.errors import ConfigError, CorpusError, ProblemList
from ragsweep.core.hashing import sha256_file, sha256_json, sha256_parts, source_digest
from ragsweep.core.lone_surrogates import lone_surrogate
from ragsweep.data import parsers as parsers_module
from ragsweep.data.access import (
    ACCESS_FIELDS,
    SIDECAR,
    Access,
    access_identity,
    check_references,
    known_groups,
    parse_access,
)
from ragsweep.data.parsers import (
    FORMAT_EXTENSIONS,
    OFF,
    PARSERS,
    DocumentWarning,
    Parsed,
    Parser,
    UnreadableDocument,
)


@dataclass(frozen=True)
class Document:
    """One source document. Offsets anywhere in ragsweep index into ``text`` (code points)."""

    id: str
    text: str
    title: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    access: Access | None = None
    """Who may read it, revoked, version (:mod:`ragsweep.data.access`); None: anyone."""


@dataclass(frozen=True)
class Corpus:
    """All documents of a corpus, in a deterministic order (sorted by id).

    ``documents`` may read each document on first use (:mod:`ragsweep.data.corpus_cache`: an
    unchanged JSONL file); it then also knows the ``ids`` and ``known_hash``, the content
    hash recorded when the file was last read whole, so neither needs every document.
    """

    documents: Sequence[Document]
    source: str
    known_hash: str | None = field(default=None, compare=False)

    @functools.cached_property
    def ids(self) -> Sequence[str]:
        """Every document id, in corpus order: the reader's own sequence when it keeps one
        (a lazily read JSONL file decodes each id on use, so a warm run does not decode
        every id of a large corpus to look up a few hundred)."""
        listed = getattr(self.documents, "ids", None)
        return listed if listed is not None else tuple(d.id for d in self.documents)

    @functools.cached_property
    def positions(self) -> Mapping[str, int]:
        """Each document id's position in corpus order: the reader's own lookup when it has
        one (a lazily read JSONL file searches its stored ids). Ids in sorted order (as
        :func:`load_corpus` keeps them) are found by binary search, without building a
        dictionary of every id (a warm run looks up a few thousand of them)."""
        found = getattr(self.documents, "positions", None)
        if found is not None:
            return found
        ids = self.ids
        if all(map(operator.lt, ids, itertools.islice(ids, 1, None))):  # C: ~2x pairwise
            return SortedPositions(ids)
        return {doc_id: i for i, doc_id in enumerate(ids)}

    @functools.cached_property
    def access(self) -> Mapping[str, Access]:
        """The access metadata of every document that has some, by id: the reader's own
        table when it keeps one (a lazily read JSONL file stores it beside its ids)."""
        known = getattr(self.documents, "access", None)
        if known is not None:
            return known
        return {d.id: d.access for d in self.documents if d.access is not None}

    @functools.cached_property
    def groups(self) -> frozenset[str]:
        """Every group some document's ``acl`` names (what a case's ``principal`` may name)."""
        return known_groups(self.access.values())

    def __len__(self) -> int:
        return len(self.documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.documents)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.positions

    def get(self, doc_id: str) -> Document:
        return self.documents[self.positions[doc_id]]

    @property
    def n_chars(self) -> int:
        """Total characters (code points) over all documents."""
        return sum(len(d.text) for d in self.documents)

    def content_hash(self) -> str:
        """sha256 over every (id, text) pair in id order, and, when some document has access
        metadata (:mod:`ragsweep.data.access`), over that too: a changed ACL or revocation
        is a new corpus snapshot. A corpus without any hashes as it did before access
        metadata existed. Titles and ``metadata`` are not hashed: they do not reach the
        index."""
        return self._content_hash

    @functools.cached_property
    def _content_hash(self) -> str:
        # cached_property writes the instance __dict__ directly, so it works on a frozen
        # dataclass without object.__setattr__
        if self.known_hash is not None:
            return self.known_hash
        texts = sha256_parts(p for d in self.documents for p in (d.id, d.text))
        if not self.access:
            return texts
        return sha256_json({"texts": texts, "access": access_identity(self.access)})


class SortedPositions(Mapping[str, int]):
    """``{id: position}`` over ids in strictly increasing order, by binary search."""

    def __init__(self, ids: Sequence[str]) -> None:
        self._ids = ids

    def __getitem__(self, doc_id: str) -> int:
        if isinstance(doc_id, str):
            position = bisect.bisect_left(self._ids, doc_id)
            if position < len(self._ids) and self._ids[position] == doc_id:
                return position
        raise KeyError(doc_id)

    def __contains__(self, doc_id: object) -> bool:
        try:
            self[doc_id]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


def load_corpus(cfg: CorpusConfig, cache: StageCache | None = None) -> Corpus:
    """Read the corpus described by ``cfg``; raise CorpusError naming the file on failure.

    Every problem of the input (undecodable files, bad JSONL lines, duplicate ids, links
    to outside the corpus) is collected in one pass and reported together. With ``cache``,
    the text of HTML, PDF and DOCX files is the cached ``parsed`` stage (:func:`parse_key`).
    """
    return load_corpus_with_lines(cfg, cache)[0]


def load_corpus_with_lines(
    cfg: CorpusConfig, cache: StageCache | None = None
) -> tuple[Corpus, dict[str, int]]:
    """:func:`load_corpus`, and for a JSONL corpus each document's 1-based line number
    (empty for a directory), from the same single read."""
    path = Path(cfg.path)
    lines: dict[str, int] = {}
    if path.is_dir():
        documents = _read_directory(path, cfg, cache or StageCache(None))
    elif path.is_file() and path.suffix.lower() == ".jsonl":
        numbered = read_jsonl_numbered(path)
        documents = [doc for doc, _ in numbered]
        lines = {doc.id: number for doc, number in numbered}
    elif path.exists():
        raise CorpusError(f"corpus.path={path}: expected a directory or a .jsonl file")
    else:
        raise CorpusError(f"corpus.path={path} does not exist")
    if not documents:
        what = (
            f"no files with extensions {', '.join(cfg.extensions)}"
            if path.is_dir()
            else ("no document lines")
        )
        raise CorpusError(f"corpus.path={path}: no documents found ({what})")
    documents.sort(key=lambda d: d.id)
    return Corpus(documents=tuple(documents), source=str(path)), lines


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text. A line ends at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (files
    with CR-only line endings have lines too); U+2028 and U+0085, which JSON strings may
    hold and ``str.splitlines`` would break on, do not end a line. A raw ``\\r`` cannot
    occur inside a JSON string, so no valid line is ever cut."""
    if "\r" not in text:  # LF only, the usual case: str.split is ~10x faster than the regex
        return text.split("\n")
    return _LINE_END.split(text)


_LINE_END = re.compile(r"\r\n|\r|\n")


# --- directories ------------------------------------------------------------------------


def parsers_by_extension(cfg: CorpusConfig) -> dict[str, tuple[str, Parser]]:
    """``{extension: (parser name, parser)}`` for every parsed format that is not ``off``;
    ConfigError naming the key for an unknown parser or one of another format."""
    chosen = {"html": cfg.html_parser, "pdf": cfg.pdf_parser, "docx": cfg.docx_parser}
    found: dict[str, tuple[str, Parser]] = {}
    for fmt, name in chosen.items():
        if name == OFF:
            continue
        try:
            parser = PARSERS.get(name)
        except ConfigError as exc:
            raise ConfigError(f"corpus.{fmt}_parser: {exc} (or {OFF})") from None
        if parser.format != fmt:
            raise ConfigError(f"corpus.{fmt}_parser={name!r} reads {parser.format}, not {fmt}")
        found.update({ext: (name, parser) for ext in FORMAT_EXTENSIONS[fmt]})
    return found


def corpus_files_digest(cfg: CorpusConfig) -> str:
    """sha256 of the corpus's source files, whatever parser reads them: for a folder, every
    ``(id, file sha256)`` of ``corpus.extensions`` and of every parsed format's extensions
    (parser ``off`` included) and the access sidecar's bytes; for a JSONL file, its sha256.
    A sweep over parsers holds its jobs to this (their texts differ by parser)."""
    root = Path(cfg.path)
    if not root.is_dir():
        return sha256_file(root)
    problems = ProblemList(f"corpus.path={root}", CorpusError)
    every = {ext for extensions in FORMAT_EXTENSIONS.values() for ext in extensions}
    found = _document_files(root, cfg, problems, every)
    problems.raise_if_any()
    files = [(doc_id, sha256_file(file)) for doc_id, file in found if doc_id != SIDECAR]
    sidecar = root / SIDECAR
    return sha256_json(
        {"files": files, "access": sha256_file(sidecar) if sidecar.is_file() else None}
    )


def _read_directory(root: Path, cfg: CorpusConfig, cache: StageCache) -> list[Document]:
    problems = ProblemList(f"corpus.path={root}", CorpusError)
    parsers = parsers_by_extension(cfg)
    found = _document_files(root, cfg, problems, set(parsers))
    files = [(doc_id, file) for doc_id, file in found if doc_id != SIDECAR]
    access = _read_sidecar(root / SIDECAR, {doc_id for doc_id, _ in files}, problems)
    documents = []
    for doc_id, file in files:
        try:
            parser = parsers.get(file.suffix.lower())
            if parser is None:
                document = Document(id=doc_id, text=_read_utf8(file))
            else:
                document = _parsed_document(doc_id, file, *parser, cache)
            documents.append(dataclasses.replace(document, access=access.get(doc_id)))
        except CorpusError as exc:
            problems.add(str(exc))
        except UnreadableDocument as exc:
            warnings.warn(f"{exc} (skipped)", DocumentWarning, stacklevel=2)
    problems.raise_if_any()
    return documents


PARSED_STAGE = "parsed"


def _parsed_document(
    doc_id: str, file: Path, name: str, parser: Parser, cache: StageCache
) -> Document:
    parsed = cache.json_value(
        PARSED_STAGE,
        parse_key(file, name, parser),
        lambda: parser.parse(file),
        lambda p: {"text": p.text, "title": p.title, "page_starts": list(p.page_starts)},
        lambda d: Parsed(d["text"], d["title"], tuple(d["page_starts"])),
    )
    return Document(doc_id, parsed.text, parsed.title, parsed.metadata(name))


def parse_key(file: Path, name: str, parser: Parser) -> str:
    """Key of a file's parsed text: its bytes, the parser's name, its library's version
    and the parsers' code."""
    return sha256_json(
        {
            "file": sha256_file(file),
            "parser": name,
            "version": parser.version,
            "code": _parsers_code(),
        }
    )


@functools.cache
def _parsers_code() -> str:
    return source_digest(parsers_module)


def _read_sidecar(file: Path, ids: set[str], problems: ProblemList) -> dict[str, Access]:
    """The access metadata of a folder's documents (:data:`~ragsweep.data.access.SIDECAR`,
    one object a line); every bad line is added to ``problems``. Empty without the file."""
    if not file.is_file():
        return {}
    try:
        text = _read_utf8(file, encoding="utf-8-sig")
    except CorpusError as exc:
        problems.add(str(exc))
        return {}
    access: dict[str, Access] = {}
    where: dict[str, str] = {}
    for line_no, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        here = f"{file}:{line_no}"
        try:
            doc_id, item = _sidecar_line(json_line(line, here), here, ids)
        except CorpusError as exc:
            problems.add(str(exc))
            continue
        if doc_id in where:
            problems.add(f"{here}: document {doc_id!r} already listed on {where[doc_id]}")
            continue
        access[doc_id], where[doc_id] = item, here
    check_references(access, ids, where, problems)
    return access


def _sidecar_line(record: Any, where: str, ids: set[str]) -> tuple[str, Access]:
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: expected a JSON object, got {type(record).__name__}")
    unknown = set(record) - ACCESS_FIELDS - {"id"}
    if unknown:
        raise CorpusError(
            f"{where}: unknown field(s) {sorted(unknown)}; expected id and any of "
            f"{sorted(ACCESS_FIELDS)}"
        )
    doc_id = record.get("id")
    if not isinstance(doc_id, str) or doc_id not in ids:
        raise CorpusError(f"{where}: 'id' {doc_id!r} names no document of the folder")
    return doc_id, parse_access(record, where, doc_id) or Access()


def _document_files(
    root: Path, cfg: CorpusConfig, problems: ProblemList, parsed: set[str]
) -> list[tuple[str, Path]]:
    """``(id, path)`` of every document file below ``root`` (see docs/formats.md for the
    rules on hidden entries, extensions and symbolic links), sorted by id: files with one
    of ``corpus.extensions`` and files of a ``parsed`` extension."""
    wanted = {e.lower() for e in cfg.extensions} | parsed
    walk = _Walk(root, wanted, cfg.follow_external_links, problems)
    walk.folder(root, PurePosixPath())
    return sorted(walk.found)


@dataclass
class _Walk:
    """A walk over a corpus directory that applies the symbolic-link rule.

    A link whose resolved target lies inside the corpus is followed for a file (its id is
    the link's path) and skipped for a directory (its files are read under their own path).
    A link to outside the corpus is a problem unless ``follow_external`` (then followed,
    directories included, each real directory at most once). A broken link that would be
    a document is a problem.
    """

    root: Path
    wanted: set[str]
    follow_external: bool
    problems: ProblemList
    found: list[tuple[str, Path]] = field(default_factory=list)
    seen_dirs: set[Path] = field(default_factory=set)

    def folder(self, path: Path, rel: PurePosixPath) -> None:
        real = path.resolve()
        if real in self.seen_dirs:
            return  # a followed link led back to a directory already read
        self.seen_dirs.add(real)
        for entry in sorted(path.iterdir()):
            if entry.name.startswith("."):
                continue  # hidden files and folders (.git, .obsidian, ...)
            child = rel / entry.name
            if entry.is_symlink():
                self.link(entry, child)
            elif entry.is_dir():
                self.folder(entry, child)
            elif entry.is_file():
                self.file(entry, child)

    def file(self, path: Path, rel: PurePosixPath) -> None:
        if path.suffix.lower() in self.wanted:
            self.found.append((rel.as_posix(), path))

    def link(self, entry: Path, rel: PurePosixPath) -> None:
        target = _link_target(entry)
        if target is None or not target.exists():
            if entry.suffix.lower() in self.wanted:
                self.problems.add(
                    f"{entry}: broken symbolic link (to {os.readlink(entry)}); fix or remove it"
                )
            return
        inside = target.is_relative_to(self.root.resolve())
        if target.is_dir():
            if not inside and self._may_follow(entry, target, "directory"):
                self.folder(entry, rel)
            return
        if entry.suffix.lower() in self.wanted and (
            inside or self._may_follow(entry, target, "file")
        ):
            self.found.append((rel.as_posix(), entry))

    def _may_follow(self, entry: Path, target: Path, kind: str) -> bool:
        if self.follow_external:
            return True
        self.problems.add(
            f"{entry}: symbolic link to the {kind} {target}, outside the corpus; set "
            "corpus.follow_external_links=true to read it, or remove the link"
        )
        return False


def _link_target(link: Path) -> Path | None:
    """The fully resolved target of ``link``; None for a link loop."""
    try:
        return link.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop before Python 3.13
        return None


def _read_utf8(file: Path, encoding: str = "utf-8") -> str:
    try:
        data = file.read_bytes()
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        binary = _binary_format(data)
        if binary is not None:
            raise CorpusError(
                f"{file}: a {binary} file, not text; remove {file.suffix} from "
                f"corpus.extensions and let corpus.{binary.lower()}_parser read it "
                '(docs/formats.md, "Documents other than text")'
            ) from None
        raise CorpusError(
            f"{file}: not valid UTF-8 (byte {exc.start}: {exc.reason}); "
            "convert it, e.g. iconv -f <encoding> -t utf-8"
        ) from None
    except OSError as exc:
        raise CorpusError(f"{file}: cannot be read ({exc.strerror})") from None


_MAGIC = {b"%PDF": "PDF", b"PK\x03\x04": "DOCX"}


def _binary_format(data: bytes) -> str | None:
    """The parsed format a file's first bytes announce (a DOCX is a zip file), if any."""
    return next((name for magic, name in _MAGIC.items() if data.startswith(magic)), None)


# --- JSONL ------------------------------------------------------------------------------


def _read_jsonl(file: Path) -> list[Document]:
    """The documents of a JSONL corpus; every bad line and duplicate id is reported."""
    return [doc for doc, _ in read_jsonl_numbered(file)]


def read_jsonl_numbered(file: Path) -> list[tuple[Document, int]]:
    """The documents of a JSONL corpus, each with its 1-based line number (lines as
    :func:`jsonl_lines` cuts them), in file order; every bad line and duplicate id is
    reported together (CorpusError)."""
    text = _read_utf8(file, encoding="utf-8-sig")
    problems = ProblemList(str(file), CorpusError)
    documents: list[tuple[Document, int]] = []
    first_line: dict[str, int] = {}
    for line_no, line in enumerate(jsonl_lines(text), start=1):
        if not line.strip():
            continue
        where = f"{file}:{line_no}"
        try:
            doc = document_from_record(json_line(line, where), where)
        except CorpusError as exc:
            problems.add(str(exc))
            continue
        if doc.id in first_line:
            problems.add(
                f"{where}: duplicate document id {doc.id!r} (first defined on line "
                f"{first_line[doc.id]})"
            )
            continue
        first_line[doc.id] = line_no
        documents.append((doc, line_no))
    access = {doc.id: doc.access for doc, _ in documents if doc.access is not None}
    located = {doc_id: f"{file}:{first_line[doc_id]}" for doc_id in access}
    check_references(access, first_line, located, problems)
    problems.raise_if_any()
    return documents


def json_line(line: str, where: str) -> Any:
    """The JSON value on a corpus line; CorpusError when it is not JSON or holds a lone
    surrogate (:mod:`ragsweep.core.lone_surrogates`)."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{where}: invalid JSON ({exc.msg})") from None
    problem = lone_surrogate(line, value)
    if problem is not None:
        raise CorpusError(f"{where}: {problem}")
    return value


_FIELDS = frozenset({"id", "text", "title", "metadata"}) | ACCESS_FIELDS


def document_from_record(record: Any, where: str) -> Document:
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if not _FIELDS.issuperset(record):
        raise CorpusError(f"{where}: unknown field(s) {sorted(set(record) - _FIELDS)}")
    doc_id, text = record.get("id"), record.get("text")
    if not isinstance(doc_id, str) or not doc_id:
        raise CorpusError(f"{where}: 'id' must be a non-empty string")
    if not isinstance(text, str):
        raise CorpusError(f"{where}: document {doc_id!r}: 'text' must be a string")
    title = record.get("title")
    if title is not None and not isinstance(title, str):
        raise CorpusError(f"{where}: document {doc_id!r}: 'title' must be a string")
    metadata = record.get("metadata", {})
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise CorpusError(f"{where}: document {doc_id!r}: 'metadata' must be an object")
    access = parse_access(record, where, doc_id)
    return Document(id=doc_id, text=text, title=title, metadata=metadata, access=access)
