"""Configuration of the generation + judging stage, and the rubric file it loads.

``judge=off`` (the default) disables the stage; ``judge=ollama`` enables it. The rubric is a
YAML file (``judge.rubric``): the prompts that instruct the generator and the judge, the
score range, and the scores a refusal on an unanswerable case receives. Its content hash
(not its path) is part of every cached judgment's key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsweep.config import check_all, load_config_file, not_hashed, result_fields
from ragsweep.errors import ConfigError
from ragsweep.hashing import sha256_json
from ragsweep.remote.http import RetryPolicy
from ragsweep.remote.ollama import DEFAULT_BASE_URL

SCORES = ("faithfulness", "relevance")


@dataclass(frozen=True)
class JudgeConfig:
    """The ``judge`` config group.

    ``generator`` answers each question from its packed context; ``judge`` scores the
    answer (both Ollama model names, e.g. ``qwen2.5:7b`` and ``gemma2:27b``). The context
    is the case's retrieved chunks in rank order, at most ``context_chunks`` of them and, if
    ``context_chars`` is set, at most that many characters of chunk text (the chunk that
    crosses the limit is cut). Both models run at temperature 0 with ``seed``; ``num_ctx``
    is the models' context window in tokens (Ollama silently drops the start of longer
    prompts), ``answer_tokens`` caps the generator's answer. ``timeout`` and
    ``connect_timeout`` are seconds; ``retries`` and ``backoff`` (seconds, doubled per
    retry) apply to connection errors and 5xx answers.
    """

    enabled: bool = False
    base_url: str = not_hashed(DEFAULT_BASE_URL)
    generator: str = ""
    judge: str = ""
    rubric: str = not_hashed("")
    context_chunks: int = 5
    context_chars: int | None = None
    seed: int = 42
    num_ctx: int = 8192
    answer_tokens: int = 512
    timeout: float = not_hashed(600.0)
    connect_timeout: float = not_hashed(5.0)
    retries: int = not_hashed(2)
    backoff: float = not_hashed(1.0)

    def __post_init__(self) -> None:
        if not self.enabled:
            return
        for key, example in (("generator", "qwen2.5:7b"), ("judge", "gemma2:27b")):
            if not getattr(self, key).strip():
                raise ConfigError(f"judge.{key} is required with judge=ollama (e.g. {example})")
        checks = (
            (bool(self.rubric), "rubric", "the path of a rubric YAML file"),
            (self.context_chunks >= 1, "context_chunks", ">= 1"),
            (self.context_chars is None or self.context_chars >= 1, "context_chars", ">= 1"),
            (self.num_ctx >= 256, "num_ctx", ">= 256 tokens"),
            (self.answer_tokens >= 1, "answer_tokens", ">= 1"),
            *RetryPolicy.checks(self),
        )
        check_all("judge", self, checks)

    def identity(self) -> dict[str, Any]:
        """What judged results depend on besides the served models' own identity: the
        result-affecting settings and the rubric's content digest (not its path)."""
        return {**result_fields(self), "rubric": load_rubric(self.rubric).digest}


@dataclass(frozen=True)
class Rubric:
    """What the generator and the judge are told, and how verdicts are bounded.

    ``generator_prompt`` and ``judge_prompt`` are system prompts; the judge must answer
    with a JSON object holding ``faithfulness`` and ``relevance`` (integers 0..``max_score``),
    ``refusal`` (true/false), ``evidence`` (a verbatim quote from the context) and ``note``.
    ``refusal_on_unanswerable`` are the scores recorded when the answer to an unanswerable
    case is a refusal, whatever the judge scored.
    """

    generator_prompt: str
    judge_prompt: str
    max_score: int = 2
    refusal_on_unanswerable: dict[str, int] = field(
        default_factory=lambda: {"faithfulness": 2, "relevance": 2}
    )

    def __post_init__(self) -> None:
        if self.max_score < 1:
            raise ConfigError(f"max_score={self.max_score} must be >= 1")
        scores = self.refusal_on_unanswerable
        if set(scores) != set(SCORES) or not all(
            isinstance(v, int) and 0 <= v <= self.max_score for v in scores.values()
        ):
            raise ConfigError(
                f"refusal_on_unanswerable={scores} must give faithfulness and relevance, "
                f"each an integer in 0..{self.max_score}"
            )

    @property
    def digest(self) -> str:
        """sha256 of the rubric's content (comments and key order do not count)."""
        return sha256_json(self)


def load_rubric(path: str | Path) -> Rubric:
    """Read and validate a rubric YAML file; errors name the file."""
    return load_config_file(Rubric, path, "rubric", "a judge rubric (judge.rubric)")
