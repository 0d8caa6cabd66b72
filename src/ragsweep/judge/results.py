"""Per-case judgments and their summary: metrics per run and per question type, the
``judge`` field of ``cases.jsonl`` rows, the report section and the run tags."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from rich.console import Console

from ragsweep import tags as tag
from ragsweep.judge.config import JudgeConfig
from ragsweep.metric_keys import by_type_key
from ragsweep.report import markdown_table

JUDGE_METRIC_DEFINITIONS: dict[str, str] = {
    "faithfulness_mean": "Mean judge faithfulness (0-2) over judged cases: 2 = every claim "
    "is supported by the packed context.",
    "relevance_mean": "Mean judge relevance (0-2) over judged cases: 2 = the answer "
    "addresses the question.",
    "refusal_rate_unanswerable": "Fraction of judged unanswerable cases whose answer is a "
    "refusal (higher is better).",
    "refusal_rate_answerable": "Fraction of judged answerable cases whose answer is a "
    "refusal (lower is better).",
    "abstention_accuracy": "Fraction of judged cases where the answer refuses exactly when "
    "the case is unanswerable.",
    "candidate_coverage_mean": "Mean fraction of evidence characters inside all retrieved "
    "chunks (answerable cases).",
    "packed_coverage_mean": "Mean fraction of evidence characters inside the packed context "
    "(answerable cases); below candidate coverage = lost in context assembly.",
    "judge_failures": "Cases whose judge output was invalid twice (not scored).",
    "evidence_unverified": "Judged cases whose evidence quote does not occur in the packed "
    "context (after whitespace normalization).",
    "n_judged": "Cases with a valid verdict.",
}


@dataclass(frozen=True)
class ModelInfo:
    name: str
    digest: str


@dataclass(frozen=True)
class CaseJudgment:
    """The judge stage's record of one case.

    ``faithfulness``/``relevance`` are the recorded scores: the judge's own
    (``judge_scores``) unless ``rule`` (``refusal_on_unanswerable``) replaced them. Both are
    None when the judge failed (``failure`` says why). ``evidence_status`` is ``verified``,
    ``unverified`` (quote not in the packed context) or ``none`` (no quote given).
    Coverages are None for unanswerable cases.
    """

    case_id: str
    type: str
    answerable: bool
    candidate_coverage: float | None
    packed_coverage: float | None
    packed_chunks: tuple[str, ...]
    packed_chars: int
    truncated: bool
    context_hash: str
    answer: str
    faithfulness: int | None
    relevance: int | None
    judge_scores: tuple[int, int] | None
    refusal: bool | None
    evidence: str
    evidence_status: str | None
    note: str
    rule: str | None
    failure: str | None
    attempts: int

    @property
    def judged(self) -> bool:
        return self.failure is None

    def to_json(self) -> dict[str, Any]:
        row = asdict(self)
        del row["case_id"], row["type"], row["answerable"]  # already in the cases.jsonl row
        row["status"] = "judged" if self.judged else "judge_failed"
        return row


def summarize_judgments(judgments: Sequence[CaseJudgment]) -> dict[str, float]:
    """The metrics of ``JUDGE_METRIC_DEFINITIONS`` over ``judgments``; means over empty sets
    are left out rather than reported as 0."""
    judged = [j for j in judgments if j.judged]
    answerable = [j for j in judged if j.answerable]
    unanswerable = [j for j in judged if not j.answerable]
    out: dict[str, float] = {
        "n_judged": float(len(judged)),
        "judge_failures": float(len(judgments) - len(judged)),
        "evidence_unverified": float(sum(j.evidence_status == "unverified" for j in judged)),
    }
    means: dict[str, list[Any]] = {
        "faithfulness_mean": [j.faithfulness for j in judged],
        "relevance_mean": [j.relevance for j in judged],
        "refusal_rate_unanswerable": [j.refusal for j in unanswerable],
        "refusal_rate_answerable": [j.refusal for j in answerable],
        "abstention_accuracy": [j.refusal == (not j.answerable) for j in judged],
        "candidate_coverage_mean": [j.candidate_coverage for j in judgments if j.answerable],
        "packed_coverage_mean": [j.packed_coverage for j in judgments if j.answerable],
    }
    for name, values in means.items():
        present = [float(v) for v in values if v is not None]
        if present:
            out[name] = math.fsum(present) / len(present)
    return out


@dataclass(frozen=True)
class JudgeOutcome:
    """All judgments of a run and what produced them."""

    judgments: tuple[CaseJudgment, ...]
    generator: ModelInfo
    judge: ModelInfo
    rubric_digest: str
    cfg: JudgeConfig

    @cached_property
    def overall(self) -> dict[str, float]:
        return summarize_judgments(self.judgments)

    @cached_property
    def by_type(self) -> dict[str, dict[str, float]]:
        types = sorted({j.type for j in self.judgments})
        return {t: summarize_judgments([j for j in self.judgments if j.type == t]) for t in types}

    def flat_metrics(self) -> dict[str, float]:
        """MLflow metrics: ``judge/<metric>`` and ``judge/by_type/<type>/<metric>``."""
        flat = {f"judge/{k}": v for k, v in self.overall.items()}
        for type_name, metrics in self.by_type.items():
            flat.update({by_type_key(type_name, k, "judge/by_type"): v for k, v in metrics.items()})
        return flat

    def case_fields(self) -> dict[str, dict[str, Any]]:
        """Per case id, the fields added to its ``cases.jsonl`` row (``{"judge": {...}}``)."""
        return {j.case_id: {"judge": j.to_json()} for j in self.judgments}

    def tags(self) -> dict[str, str]:
        return {
            tag.JUDGE_GENERATOR: self.generator.name,
            tag.JUDGE_GENERATOR_DIGEST: self.generator.digest,
            tag.JUDGE_JUDGE: self.judge.name,
            tag.JUDGE_JUDGE_DIGEST: self.judge.digest,
            "ragsweep.judge.rubric_sha256": self.rubric_digest,
        }

    def report_section(self) -> str:
        """Markdown for ``report.md``: models, budget, and the metric × type table."""
        by_type = self.by_type
        overall = self.overall
        budget = f"{self.cfg.context_chunks} chunks" + (
            f", {self.cfg.context_chars} characters" if self.cfg.context_chars else ""
        )
        lines = [
            "## Generation and judging",
            "",
            f"- **generator**: {self.generator.name} ({self.generator.digest[:12]})",
            f"- **judge**: {self.judge.name} ({self.judge.digest[:12]})",
            f"- **rubric**: sha256 {self.rubric_digest[:12]} ({self.cfg.rubric})",
            f"- **context budget**: {budget}; temperature 0, seed {self.cfg.seed}",
            "",
        ]
        rows = [
            [name, *(_cell(name, m.get(name)) for m in (overall, *by_type.values()))]
            for name in JUDGE_METRIC_DEFINITIONS
        ]
        lines.append(markdown_table(["measure", "all", *by_type], rows))
        lines += ["", "### Judge metric definitions", ""]
        lines += [f"- `{k}`: {v}" for k, v in JUDGE_METRIC_DEFINITIONS.items()]
        return "\n".join(lines) + "\n"

    def print_summary(self, console: Console) -> None:
        """One line per headline judge metric under the retrieval summary."""
        overall = self.overall
        headline = (
            ("faithfulness", "faithfulness_mean", "mean, 0-2"),
            ("relevance", "relevance_mean", "mean, 0-2"),
            ("abstention", "abstention_accuracy", "refuses exactly on unanswerable cases"),
        )
        for label, name, meaning in headline:
            if name in overall:
                console.print(f"  [dim]{label:>12}[/dim]  {overall[name]:.3f} ({meaning})")
        failures, unverified = int(overall["judge_failures"]), int(overall["evidence_unverified"])
        console.print(
            f"  [dim]{'judge':>12}[/dim]  {int(overall['n_judged'])} judged, "
            f"{failures} failures, {unverified} unverified evidence quotes"
        )


COUNTS = frozenset({"n_judged", "judge_failures", "evidence_unverified"})


def _cell(name: str, value: float | None) -> str:
    if value is None:
        return "–"
    return str(int(value)) if name in COUNTS else f"{value:.4f}"
