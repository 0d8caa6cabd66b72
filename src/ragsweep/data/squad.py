"""Import SQuAD JSON as a ragsweep corpus (one document per article) and golden set.

Each article becomes one document whose text is its paragraph contexts joined with
:data:`PARAGRAPH_SEPARATOR`, kept exactly as in the file, so a document offset is the
paragraph's base offset plus the SQuAD ``answer_start``. Offsets are Python code points,
0-based, end-exclusive. Each question becomes one golden case; unanswerable questions
(``is_impossible``) have no evidence. Files without ``is_impossible`` (SQuAD 1.1) import as
all answerable.

Everything is parsed and checked before anything is written, so bad input leaves no output.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

from ragsweep import __version__
from ragsweep.core.errors import ConfigError, CorpusError, GoldenError, RagsweepError
from ragsweep.core.lone_surrogates import lone_surrogate
from ragsweep.core.names import HOLDOUT
from ragsweep.core.registry import Registry
from ragsweep.data.splits import assign_split

PARAGRAPH_SEPARATOR = "\n\n"
CORPUS_FILE = "corpus.jsonl"
GOLDEN_FILE = "golden.jsonl"
SOURCE_FILE = "SOURCE.md"

_MISSING = object()
_KIND_NAMES: dict[type, str] = {
    str: "a string",
    int: "an integer",
    bool: "true or false",
    list: "a list",
    dict: "an object",
}


@dataclass(frozen=True)
class Span:
    """Character range ``[start, end)`` in a document's text."""

    start: int
    end: int

    def overlaps(self, other: Span) -> bool:
        """True when the ranges share at least one character (touching is not overlapping)."""
        return self.start < other.end and other.start < self.end

    def union(self, other: Span) -> Span:
        return Span(min(self.start, other.start), max(self.end, other.end))


@dataclass(frozen=True)
class Paragraph:
    """One SQuAD paragraph placed in its article's document at offset ``base``."""

    doc_id: str
    base: int
    context: str

    @property
    def span(self) -> Span:
        return Span(self.base, self.base + len(self.context))


@dataclass(frozen=True)
class SquadDocument:
    """One article: paragraph contexts joined, with each paragraph's start offset."""

    id: str
    text: str
    paragraph_starts: tuple[int, ...]

    def to_record(self) -> dict[str, Any]:
        """The corpus.jsonl line; the title is the SQuAD title with ``_`` read as a space."""
        metadata = {"source": "squad", "paragraph_starts": list(self.paragraph_starts)}
        title = self.id.replace("_", " ")
        return {"id": self.id, "title": title, "text": self.text, "metadata": metadata}


@dataclass(frozen=True)
class GoldenCase:
    """One question. ``evidence`` spans index into document ``doc_id``; ``split`` is None
    when ragsweep is left to assign it."""

    id: str
    question: str
    type: str
    doc_id: str
    evidence: tuple[Span, ...]
    split: str | None

    @property
    def answerable(self) -> bool:
        return bool(self.evidence)

    def to_record(self) -> dict[str, Any]:
        """The golden.jsonl line."""
        evidence = [{"doc": self.doc_id, "start": s.start, "end": s.end} for s in self.evidence]
        record: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "type": self.type,
            "answerable": self.answerable,
            "evidence": evidence,
        }
        if self.split is not None:
            record["split"] = self.split
        return record


@dataclass(frozen=True)
class EvidenceRule:
    """How an answerable question's evidence span is chosen from its verified answer spans
    (in document offsets, in file order; never empty)."""

    description: str
    select: Callable[[Paragraph, Sequence[Span]], Span]


def _merged_first_answer(paragraph: Paragraph, answers: Sequence[Span]) -> Span:
    # Crowd answers that overlap the first one are boundary variants of the same evidence;
    # splitting them into several spans would make recall "fraction of variants found".
    first = answers[0]
    merged = first
    for other in answers[1:]:
        if other.overlaps(first):
            merged = merged.union(other)
    return merged


def _whole_paragraph(paragraph: Paragraph, answers: Sequence[Span]) -> Span:
    return paragraph.span


EVIDENCE: Registry[EvidenceRule] = Registry("evidence")
EVIDENCE.add(
    "answer",
    EvidenceRule(
        "one span per question: the first answer, widened to every crowd answer overlapping it",
        _merged_first_answer,
    ),
)
EVIDENCE.add(
    "paragraph", EvidenceRule("the whole paragraph that holds the answer", _whole_paragraph)
)


@dataclass(frozen=True)
class ImportOptions:
    """Validated import options; see :func:`import_squad`."""

    evidence: str = "answer"
    max_articles: int | None = None
    holdout_fraction: float | None = None

    def __post_init__(self) -> None:
        EVIDENCE.get(self.evidence)
        if self.max_articles is not None and self.max_articles < 1:
            raise ConfigError(f"max_articles={self.max_articles} must be at least 1")
        fraction = self.holdout_fraction
        if fraction is not None and not 0.0 <= fraction < 1.0:
            raise ConfigError(f"holdout_fraction={fraction} must be in [0, 1)")


@dataclass(frozen=True)
class ImportSummary:
    """What an import wrote. ``holdout`` counts holdout cases, or is None when no explicit
    splits were written."""

    documents: int
    paragraphs: int
    answerable: int
    unanswerable: int
    holdout: int | None
    corpus_path: Path
    golden_path: Path
    source_path: Path

    @property
    def cases(self) -> int:
        return self.answerable + self.unanswerable


@dataclass(frozen=True)
class _Source:
    """The input file as read: its path, the sha256 of its bytes, its ``version`` field and
    the (not yet validated) articles to import."""

    path: Path
    sha256: str
    version: str | None
    articles: tuple[Any, ...]


# The first of these words (by position) decides the type; "how many"/"how much" is tried
# before plain "how" at the same position.
_TYPE_PATTERN = re.compile(
    r"\b(?:(?P<how_many>how\s+(?:many|much))"
    r"|(?P<word>who|whom|whose|when|where|which|why|how|what))\b"
)
_WORD_TYPES = {"whom": "who", "whose": "who"}


def question_type(question: str) -> str:
    """The question's wh-word class: who (who/whom/whose), when, where, which, why, how_many
    (how many/how much), how, what, or other when none of these words occurs."""
    match = _TYPE_PATTERN.search(question.lower())
    if match is None:
        return "other"
    if match.group("how_many"):
        return "how_many"
    word = match.group("word")
    return _WORD_TYPES.get(word, word)


def import_squad(
    source: Path,
    out_dir: Path,
    evidence: str = "answer",
    max_articles: int | None = None,
    holdout_fraction: float | None = None,
) -> ImportSummary:
    """Convert SQuAD JSON ``source`` into corpus.jsonl, golden.jsonl and SOURCE.md in
    ``out_dir`` (created if missing; existing files of those names are replaced).

    ``evidence`` is ``answer`` or ``paragraph`` (see :data:`EVIDENCE`); ``max_articles``
    keeps the first N articles in file order; ``holdout_fraction`` writes explicit splits.
    Raises ConfigError for bad options, CorpusError for a file that is not SQuAD JSON and
    GoldenError (naming the question id) for a question that cannot be converted.
    """
    options = ImportOptions(evidence, max_articles, holdout_fraction)
    squad = _read_source(Path(source), options.max_articles)
    documents, cases = _convert(squad, options)
    return _write_outputs(Path(out_dir), squad, options, documents, cases)


def _read_source(path: Path, max_articles: int | None) -> _Source:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        parsed = json.loads(data)
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    problem = lone_surrogate(data, parsed)
    if problem is not None:
        raise CorpusError(f"{path}: {problem}")
    articles = parsed.get("data") if isinstance(parsed, dict) else None
    if not isinstance(articles, list) or not articles:
        raise CorpusError(
            f"{path}: not SQuAD JSON: expected an object whose 'data' is a non-empty list "
            "of articles"
        )
    version = parsed.get("version")
    return _Source(
        path=path,
        sha256=hashlib.sha256(data).hexdigest(),
        version=version if isinstance(version, str) else None,
        articles=tuple(articles[:max_articles]),
    )


def _convert(
    squad: _Source, options: ImportOptions
) -> tuple[list[SquadDocument], list[GoldenCase]]:
    documents: list[SquadDocument] = []
    cases: list[GoldenCase] = []
    for index, raw in enumerate(squad.articles):
        document, article_cases = _convert_article(raw, f"{squad.path}: data[{index}]", options)
        documents.append(document)
        cases.extend(article_cases)
    _reject_duplicates((d.id for d in documents), f"{squad.path}: duplicate title", CorpusError)
    _reject_duplicates((c.id for c in cases), f"{squad.path}: duplicate question id", GoldenError)
    return documents, cases


def _convert_article(
    raw: Any, where: str, options: ImportOptions
) -> tuple[SquadDocument, list[GoldenCase]]:
    article = _as_object(raw, where, CorpusError)
    title = _field(article, "title", str, where, CorpusError)
    if not title:
        raise CorpusError(f"{where}: 'title' is empty (it becomes the document id)")
    where = f"{where} ({title!r})"
    raw_paragraphs = _field(article, "paragraphs", list, where, CorpusError)
    paragraph_objects = [
        _as_object(p, f"{where}.paragraphs[{i}]", CorpusError) for i, p in enumerate(raw_paragraphs)
    ]
    contexts = [
        _field(p, "context", str, f"{where}.paragraphs[{i}]", CorpusError)
        for i, p in enumerate(paragraph_objects)
    ]
    starts = _paragraph_starts(contexts)
    cases: list[GoldenCase] = []
    for i, (paragraph_object, context, base) in enumerate(
        zip(paragraph_objects, contexts, starts, strict=True)
    ):
        paragraph = Paragraph(doc_id=title, base=base, context=context)
        qas_where = f"{where}.paragraphs[{i}]"
        qas = _field(paragraph_object, "qas", list, qas_where, CorpusError)
        cases.extend(
            _convert_question(q, paragraph, f"{qas_where}.qas[{k}]", options)
            for k, q in enumerate(qas)
        )
    text = PARAGRAPH_SEPARATOR.join(contexts)
    return SquadDocument(id=title, text=text, paragraph_starts=tuple(starts)), cases


def _paragraph_starts(contexts: Sequence[str]) -> list[int]:
    """Offset of each context in the joined document text."""
    lengths = (len(c) + len(PARAGRAPH_SEPARATOR) for c in contexts[:-1])
    return list(accumulate(lengths, initial=0)) if contexts else []


def _convert_question(
    raw: Any, paragraph: Paragraph, where: str, options: ImportOptions
) -> GoldenCase:
    question = _as_object(raw, where, GoldenError)
    case_id = _field(question, "id", str, where, GoldenError)
    if not case_id:
        raise GoldenError(f"{where}: 'id' is empty")
    where = f"{where} (question {case_id!r})"
    text = _field(question, "question", str, where, GoldenError)
    impossible = _field(question, "is_impossible", bool, where, GoldenError, default=False)
    raw_answers = _field(question, "answers", list, where, GoldenError, default=[])
    answers = [
        _answer_span(a, paragraph, f"{where}: answers[{n}]") for n, a in enumerate(raw_answers)
    ]
    if impossible and answers:
        raise GoldenError(f"{where}: is_impossible is true but 'answers' is not empty")
    if not impossible and not answers:
        raise GoldenError(f"{where}: answerable question without answers")
    evidence = () if impossible else (EVIDENCE.get(options.evidence).select(paragraph, answers),)
    fraction = options.holdout_fraction
    return GoldenCase(
        id=case_id,
        question=text,
        type="unanswerable" if impossible else question_type(text),
        doc_id=paragraph.doc_id,
        evidence=evidence,
        split=None if fraction is None else assign_split(case_id, fraction),
    )


def _answer_span(raw: Any, paragraph: Paragraph, where: str) -> Span:
    """The answer's span in document offsets, after checking it slices back to its text."""
    answer = _as_object(raw, where, GoldenError)
    text = _field(answer, "text", str, where, GoldenError)
    start = _field(answer, "answer_start", int, where, GoldenError)
    if not text:
        raise GoldenError(f"{where}: empty answer text")
    found = paragraph.context[start : start + len(text)] if start >= 0 else ""
    if found != text:
        raise GoldenError(
            f"{where}: text {text!r} does not match the context at answer_start={start} "
            f"(found {found!r})"
        )
    return Span(paragraph.base + start, paragraph.base + start + len(text))


def _as_object(value: Any, where: str, error: type[RagsweepError]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise error(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _field(
    record: dict[str, Any],
    key: str,
    kind: type,
    where: str,
    error: type[RagsweepError],
    default: Any = _MISSING,
) -> Any:
    """``record[key]`` checked to be of ``kind`` (bool does not pass as int)."""
    value = record.get(key, default)
    if value is _MISSING:
        raise error(f"{where}: missing '{key}'")
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise error(f"{where}: '{key}' must be {_KIND_NAMES[kind]}, got {value!r:.60}")
    return value


def _reject_duplicates(ids: Iterable[str], message: str, error: type[RagsweepError]) -> None:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            raise error(f"{message} {item!r}")
        seen.add(item)


def _write_outputs(
    out_dir: Path,
    squad: _Source,
    options: ImportOptions,
    documents: Sequence[SquadDocument],
    cases: Sequence[GoldenCase],
) -> ImportSummary:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RagsweepError(f"{out_dir}: cannot create output directory ({exc.strerror})") from None
    holdout = sum(c.split == HOLDOUT for c in cases)
    summary = ImportSummary(
        documents=len(documents),
        paragraphs=sum(len(d.paragraph_starts) for d in documents),
        answerable=sum(c.answerable for c in cases),
        unanswerable=sum(not c.answerable for c in cases),
        holdout=None if options.holdout_fraction is None else holdout,
        corpus_path=out_dir / CORPUS_FILE,
        golden_path=out_dir / GOLDEN_FILE,
        source_path=out_dir / SOURCE_FILE,
    )
    _write_atomically(summary.corpus_path, _jsonl(d.to_record() for d in documents))
    _write_atomically(summary.golden_path, _jsonl(c.to_record() for c in cases))
    _write_atomically(summary.source_path, _source_markdown(squad, options, summary))
    return summary


# json.dumps escapes every control character below U+0020, but str.splitlines() (used by
# JSONL readers) also breaks lines at these three, so they are escaped too.
_LINE_BREAKS_KEPT_BY_JSON = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _jsonl(records: Iterable[dict[str, Any]]) -> str:
    lines = []
    for record in records:
        line = json.dumps(record, ensure_ascii=False)
        for char, escape in _LINE_BREAKS_KEPT_BY_JSON.items():
            line = line.replace(char, escape)
        lines.append(line + "\n")
    return "".join(lines)


def _write_atomically(path: Path, text: str) -> None:
    """Write to a temporary name next to ``path``, then rename it over ``path``."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise RagsweepError(f"{path}: cannot be written ({exc.strerror})") from None


def _source_markdown(squad: _Source, options: ImportOptions, summary: ImportSummary) -> str:
    rule = EVIDENCE.get(options.evidence)
    max_articles = "all" if options.max_articles is None else f"first {options.max_articles}"
    if options.holdout_fraction is None:
        splits = "not written (ragsweep assigns each case a split from its id)"
    else:
        splits = (
            f"{options.holdout_fraction} (explicit `split` per case: holdout iff "
            "int(sha256(id)[:16 hex], 16) / 2**64 < fraction; "
            f"{summary.holdout} holdout, {summary.cases - (summary.holdout or 0)} tuning)"
        )
    return f"""# SQuAD import

Written by `ragsweep-import squad` (ragsweep {__version__}).

## Origin
- Input: `{squad.path.resolve()}`
- sha256: `{squad.sha256}`
- SQuAD `version` field: {squad.version or "(none)"}

## License
SQuAD is distributed by its authors under CC BY-SA 4.0: Rajpurkar, Jia and Liang (2018),
"Know What You Don't Know: Unanswerable Questions for SQuAD" (SQuAD 2.0), and Rajpurkar
et al. (2016) for SQuAD 1.1. The files in this directory are derived from it (text
unchanged, rearranged), so they are under the same license (ShareAlike).

## Import options
- evidence: `{options.evidence}`: {rule.description}
- articles: {max_articles}
- holdout_fraction: {splits}

## Contents
- `{CORPUS_FILE}`: {summary.documents} documents, one per article: its paragraph contexts
  ({summary.paragraphs} in all) joined with {PARAGRAPH_SEPARATOR!r}; each paragraph's offset
  is in `metadata.paragraph_starts`.
- `{GOLDEN_FILE}`: {summary.cases} cases, {summary.answerable} answerable and
  {summary.unanswerable} unanswerable (`is_impossible`, no evidence).
"""
