"""Agreement of the judge with human verdicts: exact agreement and Cohen's kappa per axis,
confusion tables, the disagreeing cases, and a flag when an axis falls below its floor.

Human verdicts are a JSONL file, one object per case: ``{"id": "q1", "faithfulness": 2,
"relevance": 1, "refusal": false}``, each giving any of the three fields, optionally the
``answer`` the human graded and a ``note``. A case is compared only when the judge produced
a valid verdict and, if the human line has an ``answer``, the judge graded that same answer
(whitespace aside): a verdict on another answer says nothing about agreement.

Per axis, **exact agreement** is the fraction of compared cases where judge and human give
the same value (the recorded values, after the rubric's refusal rule), and **Cohen's
kappa** is ``(p_o - p_e) / (1 - p_e)``, with ``p_o`` that fraction and ``p_e`` the agreement
expected by chance from each side's label frequencies: 1 is perfect agreement, 0 no better
than chance, below 0 worse. Kappa is undefined (``None``) when both sides used one and the
same label for every case. ``all`` counts a case as agreeing when every field it gives
agrees. See docs/judge.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsweep.core.errors import RagsweepError
from ragsweep.core.names import CASES_FILE
from ragsweep.core.terminal import markdown_table
from ragsweep.judge.jsonl import read_jsonl

FIELDS = ("faithfulness", "relevance", "refusal")


class AgreementError(RagsweepError):
    """An unreadable run or human-verdict file (names the file and line)."""


@dataclass(frozen=True)
class Floors:
    """Lowest acceptable ``exact`` agreement (0-1) and Cohen's ``kappa`` (-1..1) per axis."""

    exact: float = 0.8
    kappa: float = 0.6


@dataclass(frozen=True)
class Disagreement:
    """A case where the judge and the human differ on ``measure``. ``packed_coverage`` is the
    fraction of the case's evidence that was in the judge's context (None: unanswerable),
    since human verdicts assume the evidence was there."""

    case_id: str
    measure: str
    human: Any
    judge: Any
    note: str
    packed_coverage: float | None = None


@dataclass
class Agreement:
    """The comparison of one run's verdicts with human verdicts.

    ``pairs[f]`` holds ``(case id, human value, judge value)`` for every compared case that
    gives field ``f``; ``all_agree`` one entry per compared case. ``not_in_run``: labelled ids
    the run lacks; ``judge_failed``: ids without a valid verdict; ``answer_differs``: ids
    whose judged answer is not the one the human graded; ``partial_context``: compared
    answerable ids whose evidence was not all in the judge's context.
    """

    pairs: dict[str, list[tuple[str, Any, Any]]] = field(default_factory=dict)
    all_agree: list[bool] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    not_in_run: list[str] = field(default_factory=list)
    judge_failed: list[str] = field(default_factory=list)
    answer_differs: list[str] = field(default_factory=list)
    partial_context: list[str] = field(default_factory=list)

    @property
    def measures(self) -> list[str]:
        """The fields with at least one compared case, in ``FIELDS`` order."""
        return [f for f in FIELDS if self.pairs.get(f)]

    def compared(self, name: str) -> int:
        return len(self.all_agree) if name == "all" else len(self.pairs.get(name, ()))

    def agreed(self, name: str) -> int:
        if name == "all":
            return sum(self.all_agree)
        return sum(h == j for _, h, j in self.pairs.get(name, ()))

    def rate(self, name: str) -> float | None:
        """Exact agreement on ``name`` (a field or ``all``); None when nothing was compared."""
        n = self.compared(name)
        return self.agreed(name) / n if n else None

    def kappa(self, name: str) -> float | None:
        """Cohen's kappa on field ``name``; None when undefined or nothing was compared."""
        return cohen_kappa([(h, j) for _, h, j in self.pairs.get(name, ())])

    def confusion(self, name: str) -> tuple[list[Any], dict[tuple[Any, Any], int]]:
        """(labels, counts by (human, judge) label) of field ``name``."""
        values = self.pairs.get(name, [])
        labels = sorted({h for _, h, _ in values} | {j for _, _, j in values})
        return labels, dict(Counter((h, j) for _, h, j in values))

    def below_floor(self, floors: Floors) -> list[str]:
        """Each axis measure under its floor, as ``"faithfulness kappa 0.21 < 0.60"``."""
        flagged = []
        for name in self.measures:
            rate, kappa = self.rate(name), self.kappa(name)
            if rate is not None and rate < floors.exact:
                flagged.append(f"{name} exact {rate:.3f} < {floors.exact:.2f}")
            if kappa is not None and kappa < floors.kappa:
                flagged.append(f"{name} kappa {kappa:.3f} < {floors.kappa:.2f}")
        return flagged

    def flagged_axes(self, floors: Floors) -> str:
        """The axes below a floor, comma-separated, or ``none`` (the run tag's value)."""
        return ",".join(sorted({flag.split()[0] for flag in self.below_floor(floors)})) or "none"

    def metrics(self, floors: Floors) -> dict[str, float]:
        """MLflow metrics ``judge/agreement/<field>/{exact,kappa,n}``, ``.../all/exact``,
        ``judge/agreement/n_compared`` and ``judge/agreement/below_floor`` (flagged
        measures); undefined values are left out."""
        out = {
            "judge/agreement/n_compared": float(self.compared("all")),
            "judge/agreement/below_floor": float(len(self.below_floor(floors))),
        }
        for name in [*self.measures, "all"]:
            rate = self.rate(name)
            if rate is not None:
                out[f"judge/agreement/{name}/exact"] = rate
            kappa = self.kappa(name) if name != "all" else None
            if kappa is not None:
                out[f"judge/agreement/{name}/kappa"] = kappa
            if name != "all":
                out[f"judge/agreement/{name}/n"] = float(self.compared(name))
        return out

    def to_json(self, floors: Floors) -> dict[str, Any]:
        return {
            "rates": {n: self.rate(n) for n in [*self.measures, "all"] if self.compared(n)},
            "kappa": {n: self.kappa(n) for n in self.measures},
            "compared": {n: self.compared(n) for n in [*self.measures, "all"] if self.compared(n)},
            "agreed": {n: self.agreed(n) for n in [*self.measures, "all"] if self.compared(n)},
            "confusion": {n: _confusion_json(*self.confusion(n)) for n in self.measures},
            "floors": {"exact": floors.exact, "kappa": floors.kappa},
            "below_floor": self.below_floor(floors),
            "disagreements": [vars(d) for d in self.disagreements],
            "not_in_run": self.not_in_run,
            "judge_failed": self.judge_failed,
            "answer_differs": self.answer_differs,
            "partial_context": self.partial_context,
        }


def cohen_kappa(pairs: list[tuple[Any, Any]]) -> float | None:
    """Cohen's kappa of (rater A, rater B) label pairs; None for no pairs or when chance
    agreement is 1 (both raters gave one and the same label throughout)."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(first[label] * second[label] for label in first) / (n * n)
    if chance >= 1:
        return None
    return (observed - chance) / (1 - chance)


def _confusion_json(labels: list[Any], counts: dict[tuple[Any, Any], int]) -> dict[str, Any]:
    return {
        "labels": labels,
        "rows_human_columns_judge": [[counts.get((h, j), 0) for j in labels] for h in labels],
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
        elif record.get("status") != "judged":
            result.judge_failed.append(case_id)
        elif "answer" in verdict and _same_text(verdict["answer"], record.get("answer")):
            _compare_case(result, case_id, verdict, record)
        elif "answer" in verdict:
            result.answer_differs.append(case_id)
        else:
            _compare_case(result, case_id, verdict, record)
    return result


def _compare_case(
    result: Agreement, case_id: str, verdict: Mapping[str, Any], record: Mapping[str, Any]
) -> None:
    coverage = record.get("packed_coverage")
    if coverage is not None and coverage < 1:
        result.partial_context.append(case_id)
    agree = True
    for name in FIELDS:
        if name not in verdict:
            continue
        judge_value = record.get(name)
        result.pairs.setdefault(name, []).append((case_id, verdict[name], judge_value))
        if verdict[name] != judge_value:
            agree = False
            note = str(record.get("note", ""))
            result.disagreements.append(
                Disagreement(case_id, name, verdict[name], judge_value, note, coverage)
            )
    result.all_agree.append(agree)


def _same_text(a: Any, b: Any) -> bool:
    return isinstance(a, str) and isinstance(b, str) and a.split() == b.split()


def load_judged(run: Path) -> dict[str, dict[str, Any]]:
    """Case id → ``judge`` record from a run directory or its ``cases.jsonl``."""
    path = run / CASES_FILE if run.is_dir() else run
    return judged_records(read_jsonl(path, AgreementError), str(path))


def judged_records(rows: list[tuple[int, dict[str, Any]]], where: str) -> dict[str, dict[str, Any]]:
    """Case id → ``judge`` record from the numbered rows of a ``cases.jsonl``."""
    judged: dict[str, dict[str, Any]] = {}
    for line_no, row in rows:
        record = row.get("judge")
        if record is None:
            continue
        if not isinstance(record, dict) or not isinstance(row.get("id"), str):
            raise AgreementError(f"{where}:{line_no}: 'judge' must be an object on a case row")
        judged[row["id"]] = record
    if not judged:
        raise AgreementError(f"{where} has no judged cases: was the run made with a judge?")
    return judged


def load_human(path: str | Path) -> dict[str, dict[str, Any]]:
    """Case id → human verdict (the given ``FIELDS``, and ``answer`` when given); each line
    needs ``id`` and at least one of ``FIELDS``."""
    path = Path(path)
    verdicts: dict[str, dict[str, Any]] = {}
    for line_no, row in read_jsonl(path, AgreementError):
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
        if "answer" in row and not isinstance(row["answer"], str):
            raise AgreementError(f"{where}: case {case_id!r}: 'answer' must be a string")
        verdicts[case_id] = {**given, **({"answer": row["answer"]} if "answer" in row else {})}
    return verdicts


def _is_score(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# --- rendering -----------------------------------------------------------------------


def render(result: Agreement, floors: Floors) -> str:
    """Plain-text report: rates and kappa per field, confusion tables, floor flags, then
    the cases that were not compared and the disagreeing ones."""
    lines = ["judge agreement with human verdicts", ""]
    for name in [*result.measures, "all"]:
        if result.compared(name):
            kappa = result.kappa(name) if name != "all" else None
            tail = f", kappa {_num(kappa)}" if name != "all" else ""
            lines.append(
                f"  {name:<13} {result.agreed(name)}/{result.compared(name)} agree "
                f"({_num(result.rate(name))}){tail}"
            )
    for name in result.measures:
        labels, counts = result.confusion(name)
        lines += ["", f"  {name} (rows: human, columns: judge)"]
        lines.append("    " + " " * 8 + "".join(f"{_label(j):>7}" for j in labels))
        for h in labels:
            cells = "".join(f"{counts.get((h, j), 0):>7}" for j in labels)
            lines.append(f"    {_label(h):>8}{cells}")
    lines += ["", *_status_lines(result, floors)]
    if result.disagreements:
        lines += ["", "disagreements (case, field: human vs judge; judge note):"]
        lines += [f"  {_disagreement(d)}" for d in result.disagreements]
    return "\n".join(lines) + "\n"


def render_markdown(result: Agreement, floors: Floors, title: str = "##") -> str:
    """The same as :func:`render`, as a Markdown section (for report.md and MLflow)."""
    rows = [
        [
            name,
            str(result.compared(name)),
            _num(result.rate(name)),
            _num(result.kappa(name)) if name != "all" else "",
        ]
        for name in [*result.measures, "all"]
        if result.compared(name)
    ]
    lines = [f"{title} Judge agreement with human verdicts", ""]
    lines += [markdown_table(["axis", "compared", "exact", "kappa"], rows), ""]
    lines += [f"- {line.strip()}" for line in _status_lines(result, floors)]
    for name in result.measures:
        labels, counts = result.confusion(name)
        table = [[_label(h), *(str(counts.get((h, j), 0)) for j in labels)] for h in labels]
        lines += ["", f"{name}: rows human, columns judge", ""]
        lines.append(markdown_table(["human \\ judge", *map(_label, labels)], table))
    if result.disagreements:
        lines += ["", "Disagreements (case, field: human vs judge; judge note):", ""]
        lines += [f"- {_disagreement(d)}" for d in result.disagreements]
    return "\n".join(lines) + "\n"


def _status_lines(result: Agreement, floors: Floors) -> list[str]:
    flagged = result.below_floor(floors)
    floor = f"(floors: exact {floors.exact:.2f}, kappa {floors.kappa:.2f})"
    lines = [
        f"  BELOW THE FLOOR {floor}: {'; '.join(flagged)}"
        if flagged
        else f"  every axis at or above the floor {floor}"
    ]
    named = (
        ("judge failed (not compared)", result.judge_failed),
        ("answer differs from the one the human graded (not compared)", result.answer_differs),
        ("not in the run (not compared)", result.not_in_run),
        ("evidence not all in the judge's context", result.partial_context),
    )
    lines += [f"  {what}: {', '.join(ids)}" for what, ids in named if ids]
    if not result.compared("all"):
        lines.append("  no case could be compared")
    return lines


def _disagreement(d: Disagreement) -> str:
    context = (
        f" [evidence in context: {d.packed_coverage:.2f}]"
        if d.packed_coverage is not None and d.packed_coverage < 1
        else ""
    )
    return f"{d.case_id}  {d.measure}: {d.human} vs {d.judge}; {d.note}{context}"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _label(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
