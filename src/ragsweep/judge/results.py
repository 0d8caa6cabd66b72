"""Per-case judgments and their summary: metrics per run and per question type, the
``judge`` field of ``cases.jsonl`` rows, the report section and the run tags."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from rich.console import Console

from ragsweep.core import tags as tag
from ragsweep.core.terminal import markdown_table
from ragsweep.eval.metric_keys import JUDGE, JUDGE_BY_TYPE, by_type_key
from ragsweep.index.remote.chat import ServedChatModel
from ragsweep.judge.agreement import Agreement, Floors, render_markdown
from ragsweep.judge.calls import InvalidReply
from ragsweep.judge.config import JudgeConfig
from ragsweep.judge.verdict import SCHEMA_KINDS

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
    "judge_failure_share": "Fraction of cases that are judge failures (0-1).",
    "invalid_verdict_share": "Fraction of all judge replies, retries included, that failed "
    "validation (not JSON, wrong keys, types or ranges, or cut at judge.verdict_tokens).",
    "retried": "Cases whose first judge reply was invalid (and that were asked once more).",
    "schema_violations": "Judge replies that broke the verdict schema although it was sent "
    "with the request (the server did not honour it).",
    "evidence_unverified": "Judged cases whose evidence quote does not occur in the packed "
    "context (after whitespace normalization).",
    "answer_truncated": "Answers cut at judge.answer_tokens.",
    "n_judged": "Cases with a valid verdict.",
    "answer_seconds_mean": "Mean wall time of one generator answer, in seconds (when it was "
    "computed; fixed answers take none).",
    "judge_call_seconds_mean": "Mean wall time of one judge call, in seconds (when it was "
    "computed).",
    "case_seconds_mean": "Mean model time per case (answer plus every judge call), in seconds "
    "(when it was computed).",
}
COUNTS = frozenset(
    {"n_judged", "judge_failures", "evidence_unverified", "retried", "schema_violations"}
    | {"answer_truncated"}
)
ModelInfo = ServedChatModel


@dataclass(frozen=True)
class CaseJudgment:
    """The judge stage's record of one case.

    ``faithfulness``/``relevance`` are the recorded scores: the judge's own
    (``judge_scores``) unless ``rule`` (``refusal_on_unanswerable``) replaced them. Both are
    None when the judge failed (``failure`` says why). ``evidence_status`` is ``verified``,
    ``unverified`` (quote not in the packed context) or ``none`` (no quote given).
    Coverages are None for unanswerable cases. ``attempts``, ``invalid``, ``output_mode``,
    ``constrained``, the seconds and ``answer_truncated`` are as in
    :class:`~ragsweep.judge.calls.ModelOutput`.
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
    invalid: tuple[InvalidReply, ...] = ()
    output_mode: str = ""
    constrained: bool = False
    answer_seconds: float | None = None
    judge_seconds: float = 0.0
    answer_truncated: bool = False

    @property
    def judged(self) -> bool:
        return self.failure is None

    def to_json(self) -> dict[str, Any]:
        row = asdict(self)
        del row["case_id"], row["type"], row["answerable"]  # already in the cases.jsonl row
        row["status"] = "judged" if self.judged else "judge_failed"
        return row


def summarize_judgments(judgments: Sequence[CaseJudgment]) -> dict[str, float]:
    """The metrics of ``JUDGE_METRIC_DEFINITIONS`` over ``judgments``; means and shares over
    empty sets are left out rather than reported as 0."""
    judged = [j for j in judgments if j.judged]
    answerable = [j for j in judged if j.answerable]
    unanswerable = [j for j in judged if not j.answerable]
    replies = sum(j.attempts for j in judgments)
    out: dict[str, float] = {
        "n_judged": float(len(judged)),
        "judge_failures": float(len(judgments) - len(judged)),
        "evidence_unverified": float(sum(j.evidence_status == "unverified" for j in judged)),
        "retried": float(sum(bool(j.invalid) and j.attempts > 1 for j in judgments)),
        "schema_violations": float(sum(_violations(j) for j in judgments)),
        "answer_truncated": float(sum(j.answer_truncated for j in judgments)),
    }
    if judgments:
        out["judge_failure_share"] = out["judge_failures"] / len(judgments)
    if replies:
        out["invalid_verdict_share"] = sum(len(j.invalid) for j in judgments) / replies
        out["judge_call_seconds_mean"] = math.fsum(j.judge_seconds for j in judgments) / replies
    means: dict[str, list[Any]] = {
        "faithfulness_mean": [j.faithfulness for j in judged],
        "relevance_mean": [j.relevance for j in judged],
        "refusal_rate_unanswerable": [j.refusal for j in unanswerable],
        "refusal_rate_answerable": [j.refusal for j in answerable],
        "abstention_accuracy": [j.refusal == (not j.answerable) for j in judged],
        "candidate_coverage_mean": [j.candidate_coverage for j in judgments if j.answerable],
        "packed_coverage_mean": [j.packed_coverage for j in judgments if j.answerable],
        "answer_seconds_mean": [j.answer_seconds for j in judgments],
        "case_seconds_mean": [(j.answer_seconds or 0.0) + j.judge_seconds for j in judgments],
    }
    for name, values in means.items():
        present = [float(v) for v in values if v is not None]
        if present:
            out[name] = math.fsum(present) / len(present)
    return out


def _violations(judgment: CaseJudgment) -> int:
    """Replies that broke a schema the request carried."""
    if not judgment.constrained:
        return 0
    return sum(reply.kind in SCHEMA_KINDS for reply in judgment.invalid)


@dataclass(frozen=True)
class JudgeOutcome:
    """All judgments of a run, what produced them (models, rubric, server, settings) and,
    with ``judge.human``, their agreement with human verdicts."""

    judgments: tuple[CaseJudgment, ...]
    generator: ModelInfo
    judge: ModelInfo
    rubric_digest: str
    cfg: JudgeConfig
    server_version: str = "unknown"
    agreement: Agreement | None = None

    @property
    def floors(self) -> Floors:
        return Floors(self.cfg.agreement_floor, self.cfg.kappa_floor)

    @cached_property
    def overall(self) -> dict[str, float]:
        return summarize_judgments(self.judgments)

    @cached_property
    def by_type(self) -> dict[str, dict[str, float]]:
        types = sorted({j.type for j in self.judgments})
        return {t: summarize_judgments([j for j in self.judgments if j.type == t]) for t in types}

    def flat_metrics(self) -> dict[str, float]:
        """MLflow metrics: ``judge/<metric>``, ``judge/by_type/<type>/<metric>`` and, with
        human verdicts, ``judge/agreement/...``."""
        flat = {f"{JUDGE}/{k}": v for k, v in self.overall.items()}
        for type_name, metrics in self.by_type.items():
            flat.update({by_type_key(type_name, k, JUDGE_BY_TYPE): v for k, v in metrics.items()})
        if self.agreement is not None:
            flat.update(self.agreement.metrics(self.floors))
        return flat

    def case_fields(self) -> dict[str, dict[str, Any]]:
        """Per case id, the fields added to its ``cases.jsonl`` row (``{"judge": {...}}``)."""
        return {j.case_id: {"judge": j.to_json()} for j in self.judgments}

    @property
    def output_mode(self) -> str:
        """How JSON was asked for, over every verdict (comma-separated if they differ)."""
        return ",".join(sorted({j.output_mode for j in self.judgments if j.output_mode})) or "none"

    @property
    def schema_honoured(self) -> str:
        """``true``, ``false`` or ``not_requested`` (see ``tag.JUDGE_SCHEMA_HONOURED``)."""
        if not any(j.constrained for j in self.judgments):
            return "not_requested"
        return "false" if self.overall["schema_violations"] else "true"

    def tags(self) -> dict[str, str]:
        """The reproducibility record: API, server, both models, rubric and sampling."""
        out = {
            tag.JUDGE_API: self.cfg.api,
            tag.JUDGE_SERVER_VERSION: self.server_version,
            tag.JUDGE_RUBRIC: self.rubric_digest,
            tag.JUDGE_TEMPERATURE: str(self.cfg.temperature),
            tag.JUDGE_SEED: str(self.cfg.seed),
            tag.JUDGE_OUTPUT_MODE: self.output_mode,
            tag.JUDGE_SCHEMA_HONOURED: self.schema_honoured,
            **_model_tags(self.generator, tag.JUDGE_GENERATOR_TAGS),
            **_model_tags(self.judge, tag.JUDGE_MODEL_TAGS),
        }
        if self.agreement is not None:
            out[tag.JUDGE_AGREEMENT_BELOW_FLOOR] = self.agreement.flagged_axes(self.floors)
        return out

    def report_section(self) -> str:
        """Markdown for ``report.md``: models, budget, the metric × type table and, with
        human verdicts, the agreement section."""
        by_type = self.by_type
        overall = self.overall
        budget = f"{self.cfg.context_chunks} chunks" + (
            f", {self.cfg.context_chars} characters" if self.cfg.context_chars else ""
        )
        lines = [
            "## Generation and judging",
            "",
            f"- **server**: {self.cfg.api} at {self.cfg.base_url} ({self.server_version})",
            f"- **generator**: {_describe(self.generator)}",
            f"- **judge**: {_describe(self.judge)}",
            f"- **rubric**: sha256 {self.rubric_digest[:12]} ({self.cfg.rubric})",
            f"- **context budget**: {budget}; temperature {self.cfg.temperature}, "
            f"seed {self.cfg.seed}",
            f"- **verdict format**: {self.output_mode}; schema honoured: {self.schema_honoured}",
            "",
        ]
        rows = [
            [name, *(_cell(name, m.get(name)) for m in (overall, *by_type.values()))]
            for name in JUDGE_METRIC_DEFINITIONS
        ]
        lines.append(markdown_table(["measure", "all", *by_type], rows))
        if self.agreement is not None:
            lines += ["", render_markdown(self.agreement, self.floors, "###").rstrip()]
        lines += ["", "### Judge metric definitions", ""]
        lines += [f"- `{k}`: {v}" for k, v in JUDGE_METRIC_DEFINITIONS.items()]
        return "\n".join(lines) + "\n"

    def print_summary(self, console: Console) -> None:
        """Headline judge metrics under the retrieval summary, and the agreement flag."""
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
        share = overall.get("invalid_verdict_share", 0.0)
        console.print(
            f"  [dim]{'judge':>12}[/dim]  {int(overall['n_judged'])} judged, "
            f"{failures} failures, {share:.1%} invalid replies, "
            f"{unverified} unverified evidence quotes"
        )
        if self.agreement is not None:
            self._print_agreement(console, self.agreement)

    def _print_agreement(self, console: Console, agreement: Agreement) -> None:
        cells = [
            f"{name} {_cell(name, agreement.rate(name))} "
            f"(kappa {_cell(name, agreement.kappa(name))})"
            for name in agreement.measures
        ]
        console.print(
            f"  [dim]{'agreement':>12}[/dim]  {', '.join(cells) or 'no case compared'} "
            f"over {agreement.compared('all')} cases"
        )
        flagged = agreement.below_floor(self.floors)
        if flagged:
            console.print(f"  [bold red]{'below floor':>12}[/bold red]  {'; '.join(flagged)}")


def _model_tags(model: ModelInfo, keys: tag.ModelTags) -> dict[str, str]:
    return {
        keys.name: model.name,
        keys.served_id: model.served_id,
        keys.digest: model.digest or "none",
        keys.digest_source: model.digest_source,
        keys.version: model.version,
    }


def _describe(model: ModelInfo) -> str:
    digest = f"{model.digest_source} {model.digest[:12]}" if model.digest else "no digest"
    served = f", served as {model.served_id}" if model.served_id != model.name else ""
    return f"{model.name} ({digest}{served})"


def _cell(name: str, value: float | None) -> str:
    if value is None:
        return "–"
    return str(int(value)) if name in COUNTS else f"{value:.4f}"
