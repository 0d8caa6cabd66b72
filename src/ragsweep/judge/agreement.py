"""``ragsweep-judge-agreement``: how often the judge agrees with human verdicts.

Usage: ``ragsweep-judge-agreement RUN HUMAN`` where ``RUN`` is a run directory (or its
``cases.jsonl``) evaluated with ``judge=ollama`` and ``HUMAN`` is a JSONL file of human
verdicts, one object per line: ``{"id": "q1", "faithfulness": 2, "relevance": 1,
"refusal": false}``; each verdict gives any of the three fields. For every field, the
agreement rate is the fraction of cases (with both a human value and a valid judge verdict)
where the two are equal; ``all`` counts a case as agreeing when every field it gives agrees.
Disagreeing cases are listed with both values and the judge's note. See docs/ollama.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsweep.errors import RagsweepError
from ragsweep.evaluate import CASES_FILE

FIELDS = ("faithfulness", "relevance", "refusal")


class AgreementError(RagsweepError):
    """An unreadable run or human-verdict file (names the file and line)."""


@dataclass(frozen=True)
class Disagreement:
    case_id: str
    measure: str
    human: Any
    judge: Any
    note: str


@dataclass
class Agreement:
    """Counts per field: ``compared[f]`` cases had both values, ``agreed[f]`` of them matched.
    ``not_in_run`` are human-labelled ids the run does not contain; ``judge_failed`` are
    ids whose judge output was invalid (nothing to compare)."""

    compared: dict[str, int] = field(default_factory=dict)
    agreed: dict[str, int] = field(default_factory=dict)
    disagreements: list[Disagreement] = field(default_factory=list)
    not_in_run: list[str] = field(default_factory=list)
    judge_failed: list[str] = field(default_factory=list)

    def rate(self, name: str) -> float | None:
        n = self.compared.get(name, 0)
        return self.agreed.get(name, 0) / n if n else None

    def to_json(self) -> dict[str, Any]:
        names = [*FIELDS, "all"]
        return {
            "rates": {n: self.rate(n) for n in names if n in self.compared},
            "compared": self.compared,
            "agreed": self.agreed,
            "disagreements": [vars(d) for d in self.disagreements],
            "not_in_run": self.not_in_run,
            "judge_failed": self.judge_failed,
        }


def compare(
    judged: Mapping[str, Mapping[str, Any]], human: Mapping[str, Mapping[str, Any]]
) -> Agreement:
    """Compare the judge record per case id (``cases.jsonl`` ``judge`` fields) with the
    human verdicts per case id."""
    result = Agreement()
    for case_id, verdict in human.items():
        record = judged.get(case_id)
        if record is None:
            result.not_in_run.append(case_id)
            continue
        if record.get("status") != "judged":
            result.judge_failed.append(case_id)
            continue
        all_agree = True
        for name in FIELDS:
            if name not in verdict:
                continue
            same = verdict[name] == record.get(name)
            _count(result, name, same)
            all_agree = all_agree and same
            if not same:
                note = str(record.get("note", ""))
                result.disagreements.append(
                    Disagreement(case_id, name, verdict[name], record.get(name), note)
                )
        _count(result, "all", all_agree)
    return result


def _count(result: Agreement, name: str, same: bool) -> None:
    result.compared[name] = result.compared.get(name, 0) + 1
    result.agreed[name] = result.agreed.get(name, 0) + int(same)


def load_judged(run: Path) -> dict[str, dict[str, Any]]:
    """Case id → ``judge`` record from a run directory or its ``cases.jsonl``."""
    path = run / CASES_FILE if run.is_dir() else run
    judged: dict[str, dict[str, Any]] = {}
    for line_no, row in _jsonl(path):
        record = row.get("judge")
        if record is None:
            continue
        if not isinstance(record, dict) or not isinstance(row.get("id"), str):
            raise AgreementError(f"{path}:{line_no}: 'judge' must be an object on a case row")
        judged[row["id"]] = record
    if not judged:
        raise AgreementError(f"{path} has no judged cases: was the run made with judge=ollama?")
    return judged


def load_human(path: Path) -> dict[str, dict[str, Any]]:
    """Case id → human verdict; each line needs ``id`` and at least one of FIELDS."""
    verdicts: dict[str, dict[str, Any]] = {}
    for line_no, row in _jsonl(path):
        where = f"{path}:{line_no}"
        case_id = row.get("id")
        if not isinstance(case_id, str) or not case_id:
            raise AgreementError(f"{where}: 'id' must be a non-empty string")
        if case_id in verdicts:
            raise AgreementError(f"{where}: case {case_id!r} appears twice")
        given = {k: row[k] for k in FIELDS if k in row}
        if not given:
            raise AgreementError(f"{where}: case {case_id!r} gives none of {', '.join(FIELDS)}")
        for name, value in given.items():
            valid = isinstance(value, bool) if name == "refusal" else _is_score(value)
            if not valid:
                kind = "true or false" if name == "refusal" else "an integer score"
                raise AgreementError(f"{where}: case {case_id!r}: {name}={value!r} must be {kind}")
        verdicts[case_id] = given
    return verdicts


def _is_score(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise AgreementError(f"cannot read {path}: {exc.strerror}") from None
    rows = []
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise AgreementError(f"{path}:{line_no}: invalid JSON: {exc}") from None
        if not isinstance(row, dict):
            raise AgreementError(f"{path}:{line_no}: expected a JSON object")
        rows.append((line_no, row))
    return rows


def render(result: Agreement) -> str:
    """Plain-text report: rates per field, then the disagreeing cases."""
    lines = ["judge agreement with human verdicts", ""]
    for name in [*FIELDS, "all"]:
        if name in result.compared:
            rate = result.rate(name)
            agreed, compared = result.agreed[name], result.compared[name]
            lines.append(f"  {name:<13} {agreed}/{compared} agree ({rate:.3f})")
    if result.judge_failed:
        lines.append(f"  judge failed (not compared): {', '.join(result.judge_failed)}")
    if result.not_in_run:
        lines.append(f"  not in the run (not compared): {', '.join(result.not_in_run)}")
    if result.disagreements:
        lines += ["", "disagreements (case, field: human vs judge; judge note):"]
        lines += [
            f"  {d.case_id}  {d.measure}: {d.human} vs {d.judge}; {d.note}"
            for d in result.disagreements
        ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (exit status 2 on unreadable input)."""
    parser = argparse.ArgumentParser(
        prog="ragsweep-judge-agreement",
        description="Agreement of a run's judge verdicts with human verdicts.",
    )
    parser.add_argument("run", type=Path, help="run directory (or its cases.jsonl)")
    parser.add_argument("human", type=Path, help="JSONL of human verdicts")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    try:
        result = compare(load_judged(args.run), load_human(args.human))
    except AgreementError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
    else:
        print(render(result), end="")
