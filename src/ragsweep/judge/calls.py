"""The two steps per case: the answer (from the generator model, or from a file of fixed
answers) and the judge's verdict.

Both models sample at ``judge.temperature`` with ``judge.seed``. The judge is asked for JSON
constrained to the verdict's schema where the server supports it (the accepted output mode
is recorded with each verdict). A reply that fails validation (``ragsweep.judge.verdict``)
is retried once, with a follow-up message naming the problem (repeating the same request
would return the same output at temperature 0); a second invalid reply is a judge failure,
never a score. Every invalid reply is recorded with its kind, so the share of invalid
verdicts is a metric of its own.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ragsweep.data.golden import GoldenCase
from ragsweep.index.remote.chat import ChatApi, JsonChat, Sampling, ServedChatModel
from ragsweep.judge.answers import FixedAnswers
from ragsweep.judge.config import JudgeConfig, Rubric
from ragsweep.judge.context import PackedContext
from ragsweep.judge.verdict import (
    VERDICT_KEYS,
    InvalidVerdict,
    Verdict,
    parse_verdict,
    verdict_schema,
)

MAX_ATTEMPTS = 2
__all__ = ["InvalidVerdict", "ModelOutput", "Models", "Verdict", "parse_verdict"]


REPLY_CHARS = 300
"""Characters of a rejected reply kept in its record (enough to see what went wrong)."""


@dataclass(frozen=True)
class InvalidReply:
    """One judge reply that failed validation: its ``kind`` (``not_json``, ``schema``,
    ``truncated``), the ``problem`` in words and the start of the ``reply`` itself."""

    kind: str
    problem: str
    reply: str = ""


@dataclass(frozen=True)
class ModelOutput:
    """Everything the models produced for one case (what the judge cache stores).

    ``verdict`` is None exactly when ``failure`` says why the judge output was rejected;
    ``attempts`` counts judge calls, ``invalid`` lists the rejected replies in order.
    ``output_mode`` is how JSON was asked for and ``constrained`` whether that request carried
    the verdict schema. ``answer_seconds`` is the generator's wall time (None for fixed
    answers), ``judge_seconds`` the judge's over all attempts, both as measured when the
    output was computed (a cached output keeps them). ``answer_truncated``: the answer was cut
    at ``judge.answer_tokens``.
    """

    answer: str
    verdict: Verdict | None
    failure: str | None
    attempts: int
    invalid: tuple[InvalidReply, ...] = ()
    output_mode: str = ""
    constrained: bool = False
    answer_seconds: float | None = None
    judge_seconds: float = 0.0
    answer_truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelOutput:
        fields = dict(data)
        verdict = fields.pop("verdict", None)
        invalid = fields.pop("invalid", ())
        return cls(
            verdict=Verdict(**verdict) if verdict else None,
            invalid=tuple(InvalidReply(**i) for i in invalid),
            **fields,
        )


class AnswerSource(Protocol):
    """Where answers come from; ``info`` identifies it in tags and cache keys."""

    info: ServedChatModel

    def answer(self, case: GoldenCase, rendered_context: str) -> tuple[str, bool, float | None]:
        """(answer, cut at the token cap, seconds spent, None when nothing was generated)."""
        ...


class GeneratorModel:
    """Answers from the generator model, given the packed context only."""

    def __init__(self, api: ChatApi, info: ServedChatModel, rubric: Rubric, cfg: JudgeConfig):
        self.api = api
        self.info = info
        self.rubric = rubric
        self.sampling = Sampling(cfg.temperature, cfg.seed, cfg.answer_tokens, cfg.num_ctx)
        self.system_role = cfg.system_role

    def answer(self, case: GoldenCase, rendered_context: str) -> tuple[str, bool, float | None]:
        messages = opening(
            self.rubric.generator_prompt,
            f"Context:\n{rendered_context}\n\nQuestion: {case.question}",
            self.system_role,
        )
        start = time.perf_counter()
        reply = self.api.chat(self.info.served_id, messages, self.sampling, None, None)
        return reply.text.strip(), reply.truncated, time.perf_counter() - start


class FileAnswers:
    """Answers read from a fixed-answers file (no generation)."""

    def __init__(self, answers: FixedAnswers) -> None:
        self.answers = answers
        self.info = answers.info

    def answer(self, case: GoldenCase, rendered_context: str) -> tuple[str, bool, float | None]:
        return self.answers.answer(case.id), False, None


class Models:
    """The answer source and the judge model on one chat server."""

    def __init__(
        self,
        answers: AnswerSource,
        api: ChatApi,
        judge: ServedChatModel,
        cfg: JudgeConfig,
        rubric: Rubric,
    ) -> None:
        self.answers = answers
        self.judge = judge
        self.json_chat = JsonChat(api)
        self.rubric = rubric
        self.schema = verdict_schema(rubric.max_score)
        self.sampling = Sampling(cfg.temperature, cfg.seed, cfg.verdict_tokens, cfg.num_ctx)
        self.system_role = cfg.system_role

    def run(self, case: GoldenCase, context: PackedContext) -> ModelOutput:
        """Answer from ``context`` only, then have the judge score the answer."""
        rendered = context.render()
        answer, answer_truncated, answer_seconds = self.answers.answer(case, rendered)
        messages = opening(
            self.rubric.judge_prompt,
            judge_request(case.question, rendered, answer),
            self.system_role,
        )
        invalid: list[InvalidReply] = []
        seconds = 0.0
        verdict = None
        mode = None
        for _ in range(MAX_ATTEMPTS):
            start = time.perf_counter()
            reply, mode = self.json_chat.chat(
                self.judge.served_id, messages, self.sampling, self.schema
            )
            seconds += time.perf_counter() - start
            try:
                verdict = parse_verdict(reply.text, self.rubric.max_score, reply.truncated)
                break
            except InvalidVerdict as exc:
                invalid.append(InvalidReply(exc.kind, str(exc), reply.text[:REPLY_CHARS]))
                messages += [
                    {"role": "assistant", "content": reply.text},
                    {"role": "user", "content": repair_request(str(exc), self.rubric.max_score)},
                ]
        failure = None if verdict else f"invalid judge output twice; last: {invalid[-1].problem}"
        return ModelOutput(
            answer=answer,
            verdict=verdict,
            failure=failure,
            attempts=len(invalid) + (verdict is not None),
            invalid=tuple(invalid),
            output_mode=mode.name if mode else "",
            constrained=bool(mode and mode.constrained),
            answer_seconds=answer_seconds,
            judge_seconds=seconds,
            answer_truncated=answer_truncated,
        )


def opening(system: str, user: str, system_role: bool) -> list[dict[str, str]]:
    """The first messages of a conversation: a system and a user message, or with
    ``system_role`` false one user message that starts with the system text."""
    if system_role:
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return [{"role": "user", "content": f"{system.rstrip()}\n\n{user}"}]


def judge_request(question: str, rendered_context: str, answer: str) -> str:
    """The judge's user message: the question, the packed context and the answer."""
    return (
        f"Question:\n{question}\n\nContext:\n{rendered_context}\n\nAnswer:\n{answer}\n\n"
        "Reply with the JSON object only."
    )


def repair_request(problem: str, max_score: int) -> str:
    """The follow-up after an invalid verdict."""
    keys = ", ".join(VERDICT_KEYS)
    return (
        f"Your reply could not be used: {problem}. Reply again with one JSON object with "
        f"exactly these keys ({keys}): faithfulness (integer 0-{max_score}), relevance "
        f"(integer 0-{max_score}), refusal (true or false), evidence (string), note (string)."
    )
