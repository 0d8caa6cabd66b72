"""Optional generation + judging stage (``judge=ollama`` or ``judge=openai``; off by
default): a generator model (or a file of fixed answers) answers each case from its packed
retrieved context, a judge model scores faithfulness and relevance against a rubric file,
and, with human verdicts, the judge's agreement with them is measured. See docs/judge.md."""

from __future__ import annotations

from ragsweep.judge.config import JudgeConfig, Rubric, load_rubric
from ragsweep.judge.results import CaseJudgment, JudgeOutcome
from ragsweep.judge.stage import JudgeStage, SelfPreferenceWarning, prepare_judge

__all__ = [
    "CaseJudgment",
    "JudgeConfig",
    "JudgeOutcome",
    "JudgeStage",
    "Rubric",
    "SelfPreferenceWarning",
    "load_rubric",
    "prepare_judge",
]
