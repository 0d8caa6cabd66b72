"""Configuration of the generation + judging stage, and the rubric file it loads.

``judge=off`` (the default) disables the stage; ``judge=ollama`` (Ollama's ``/api/chat``)
and ``judge=openai`` (any OpenAI-compatible ``/v1/chat/completions``) enable it. The rubric is a
YAML file (``judge.rubric``): the prompts that instruct the generator and the judge, the
score range, and the scores a refusal on an unanswerable case receives. Its content hash
(not its path) is part of every cached judgment's key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsweep.config.schema import check_all, load_config_file, not_hashed, result_fields
from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import sha256_json
from ragsweep.index.remote.chat_apis import CHAT_APIS
from ragsweep.index.remote.http import RetryPolicy
from ragsweep.index.remote.ollama import DEFAULT_BASE_URL

SCORES = ("faithfulness", "relevance")


@dataclass(frozen=True)
class JudgeConfig:
    """The ``judge`` config group.

    ``api`` is the chat protocol (``ollama`` or ``openai``, see ``CHAT_APIS``) of the server
    at ``base_url``; ``api_key_env`` names the environment variable holding its API key
    (null: none is sent; the key itself is never configured). ``generator`` answers each
    question from its packed context; ``judge`` scores the answer (model names as the
    server knows them, e.g. ``qwen2.5:7b`` and ``gemma2:27b``). ``answers``, when set, is a
    JSONL file of fixed answers (``{"id": ..., "answer": ...}``) that replaces the generator,
    so that the judge grades exactly the answers humans graded. ``human``, when set, is a
    JSONL file of human verdicts the run's verdicts are compared with; agreement below
    ``agreement_floor`` (exact agreement, 0-1) or ``kappa_floor`` (Cohen's kappa) on any
    axis is flagged.

    The context is the case's retrieved chunks in rank order, at most ``context_chunks`` of
    them and, if ``context_chars`` is set, at most that many characters of chunk text (the
    chunk that crosses the limit is cut). Both models sample at ``temperature`` with
    ``seed``; ``num_ctx`` is the context window in tokens (Ollama only, which silently drops
    the start of longer prompts; OpenAI-compatible servers set it when started),
    ``answer_tokens`` caps the generator's answer and ``verdict_tokens`` the judge's reply,
    in tokens. ``system_role`` false sends the rubric's prompts at the start of the first user
    message instead of as a system message, for chat templates without a system role
    (llama-cpp-python's ``gemma`` format drops system messages). ``timeout`` and
    ``connect_timeout`` are seconds; ``retries`` and ``backoff``
    (seconds, doubled per retry) apply to connection errors and 5xx answers.
    """

    enabled: bool = False
    api: str = "ollama"
    base_url: str = not_hashed(DEFAULT_BASE_URL)
    api_key_env: str | None = not_hashed(None)
    generator: str = ""
    judge: str = ""
    answers: str | None = not_hashed(None)
    rubric: str = not_hashed("")
    human: str | None = not_hashed(None)
    agreement_floor: float = not_hashed(0.8)
    kappa_floor: float = not_hashed(0.6)
    context_chunks: int = 5
    context_chars: int | None = None
    temperature: float = 0.0
    seed: int = 42
    num_ctx: int = 8192
    answer_tokens: int = 512
    verdict_tokens: int = 256
    system_role: bool = True
    timeout: float = not_hashed(600.0)
    connect_timeout: float = not_hashed(5.0)
    retries: int = not_hashed(2)
    backoff: float = not_hashed(1.0)

    def __post_init__(self) -> None:
        if not self.enabled:
            return
        if self.api not in CHAT_APIS:
            raise ConfigError(CHAT_APIS.unknown_message(self.api))
        roles = {"generator": "qwen2.5:7b, or judge.answers=FILE", "judge": "gemma2:27b"}
        for key, example in roles.items():
            if not getattr(self, key).strip() and not (key == "generator" and self.answers):
                raise ConfigError(f"judge.{key} is required with judge={self.api} (e.g. {example})")
        checks = (
            (bool(self.rubric), "rubric", "the path of a rubric YAML file"),
            (self.base_url.startswith(("http://", "https://")), "base_url", "an http(s) URL"),
            (self.context_chunks >= 1, "context_chunks", ">= 1"),
            (self.context_chars is None or self.context_chars >= 1, "context_chars", ">= 1"),
            (0 <= self.temperature <= 2, "temperature", "in 0..2"),
            (self.num_ctx >= 256, "num_ctx", ">= 256 tokens"),
            (self.answer_tokens >= 1, "answer_tokens", ">= 1"),
            (self.verdict_tokens >= 16, "verdict_tokens", ">= 16 tokens"),
            (0 <= self.agreement_floor <= 1, "agreement_floor", "in 0..1"),
            (-1 <= self.kappa_floor <= 1, "kappa_floor", "in -1..1"),
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
