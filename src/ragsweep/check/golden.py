"""Every problem of a golden file in one pass, for ``ragsweep check``.

:func:`ragsweep.data.golden.load_golden` stops at the first problem. This module reads the file
line by line and validates each case with the loader's own per-case validation
(:func:`ragsweep.data.golden.parse_case`), so the messages, rules and line numbers are the
loader's; it reports every failing line, then duplicate ids.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ragsweep.check.problems import Problem
from ragsweep.config.schema import GoldenConfig
from ragsweep.core.errors import GoldenError
from ragsweep.data.corpus import Corpus
from ragsweep.data.golden import (
    GoldenCase,
    GoldenSet,
    case_head,
    is_draft,
    parse_case,
    read_golden_bytes,
)
from ragsweep.data.golden_lines import Where


@dataclass(frozen=True)
class GoldenCheck:
    """The cases that validated (``golden`` is None when any line has a problem)."""

    golden: GoldenSet | None
    problems: tuple[Problem, ...]


def check_golden(cfg: GoldenConfig, corpus: Corpus) -> GoldenCheck:
    """Validate the golden file at ``cfg.path`` against ``corpus``, reporting every problem."""
    path = Path(cfg.path)
    try:
        data = read_golden_bytes(path)
        text = _decoded(path, data)
    except GoldenError as exc:
        return GoldenCheck(None, (Problem("", str(exc)),))
    cases, problems = _cases(path, text, cfg.holdout_fraction, corpus)
    problems += _duplicates(path, cases)
    if not cases and not problems:
        problems.append(Problem("", f"{path}: golden set contains no cases"))
    if problems:
        return GoldenCheck(None, tuple(problems))
    digest = hashlib.sha256(data).hexdigest()
    return GoldenCheck(GoldenSet(tuple(cases), str(path), digest), ())


def _decoded(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line_no = data[: exc.start].count(b"\n") + 1
        raise GoldenError(f"{path}:{line_no}: not valid UTF-8 ({exc.reason})") from None


def _cases(
    path: Path, text: str, holdout_fraction: float, corpus: Corpus
) -> tuple[list[GoldenCase], list[Problem]]:
    """Each line's case, or its problem (lines split on ``\\n`` only, like the loader)."""
    cases: list[GoldenCase] = []
    problems: list[Problem] = []
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if is_draft(record):
                continue  # not scored until accepted (ragsweep label)
            cases.append(parse_case(record, Where(str(path), line_no), holdout_fraction, corpus))
        except json.JSONDecodeError as exc:
            message = f"invalid JSON ({exc.msg} at column {exc.colno})"
            problems.append(Problem(f"{path}:{line_no}", message))
        except GoldenError as exc:
            problems.append(Problem("", str(exc)))
    return cases, problems


def _duplicates(path: Path, cases: list[GoldenCase]) -> list[Problem]:
    first: dict[str, int] = {}
    problems = []
    for case in cases:
        if case.id in first:
            problems.append(
                Problem(
                    f"{path}:{case.line}",
                    f"case {case.id!r}: duplicate id (first defined on line {first[case.id]})",
                )
            )
        first.setdefault(case.id, case.line)
    return problems


def check_golden_alone(cfg: GoldenConfig) -> tuple[Problem, ...]:
    """When the corpus cannot be read: the golden file's problems that need no documents
    (not UTF-8, invalid JSON, unknown fields, no id or question, duplicate ids), then one
    line saying that evidence and scopes were not checked, so a corpus problem does not
    hide the golden set's own."""
    path = Path(cfg.path)
    try:
        text = _decoded(path, read_golden_bytes(path))
    except GoldenError as exc:
        return (Problem("", str(exc)),)
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if is_draft(record):  # not a case until accepted (ragsweep label)
                continue
            case_id = case_head(record, Where(str(path), line_no))[2]
        except json.JSONDecodeError as exc:
            message = f"invalid JSON ({exc.msg} at column {exc.colno})"
            problems.append(Problem(f"{path}:{line_no}", message))
            continue
        except GoldenError as exc:
            problems.append(Problem("", str(exc)))
            continue
        if case_id in first:
            message = f"case {case_id!r}: duplicate id (first defined on line {first[case_id]})"
            problems.append(Problem(f"{path}:{line_no}", message))
        first.setdefault(case_id, line_no)
    note = "evidence and scopes not checked: the corpus could not be read (see above)"
    return (*problems, Problem(str(path), note))
