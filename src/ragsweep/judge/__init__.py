"""Optional generation + judging stage (``judge=ollama``; off by default): a generator
model answers each case from its packed retrieved context, a judge model scores
faithfulness and relevance against a rubric file. See docs/ollama.md."""

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
