"""The two model calls per case: the generator's answer and the judge's verdict.

Both go through Ollama's ``/api/chat`` at temperature 0 with a fixed seed; the judge is
asked for JSON (``format: json``). A verdict that is not valid JSON, misses a key or has a
score out of range is retried once, with a follow-up message naming the problem (repeating
the same request would return the same output at temperature 0); a second bad verdict is a
judge failure, never a score.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragsweep.judge.config import SCORES, JudgeConfig, Rubric
from ragsweep.judge.context import PackedContext
from ragsweep.remote.http import JsonClient
from ragsweep.remote.ollama import chat

VERDICT_KEYS = (*SCORES, "refusal", "evidence", "note")
MAX_ATTEMPTS = 2


@dataclass(frozen=True)
class Verdict:
    """A valid judge verdict: scores in ``0..rubric.max_score``, whether the answer is a
    refusal, the quote the judge rests on and its short note."""

    faithfulness: int
    relevance: int
    refusal: bool
    evidence: str
    note: str


@dataclass(frozen=True)
class ModelOutput:
    """Everything the models produced for one case (what the judge cache stores).
    ``verdict`` is None exactly when ``failure`` says why the judge output was rejected."""

    answer: str
    verdict: Verdict | None
    failure: str | None
    attempts: int

    def to_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "verdict": vars(self.verdict) if self.verdict else None,
            "failure": self.failure,
            "attempts": self.attempts,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelOutput:
        verdict = data.get("verdict")
        return cls(
            answer=data["answer"],
            verdict=Verdict(**verdict) if verdict else None,
            failure=data.get("failure"),
            attempts=data["attempts"],
        )


class InvalidVerdict(ValueError):
    """Judge output that cannot be scored; the message says why."""


def parse_verdict(text: str, max_score: int) -> Verdict:
    """Validate the judge's raw output; raises :class:`InvalidVerdict` naming the problem."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidVerdict(f"not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(data, dict):
        raise InvalidVerdict(f"a JSON {type(data).__name__}, not an object")
    missing = [k for k in VERDICT_KEYS if k not in data]
    if missing:
        raise InvalidVerdict(f"missing key(s): {', '.join(missing)}")
    for key in SCORES:
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidVerdict(f"{key}={value!r} is not an integer")
        if not 0 <= value <= max_score:
            raise InvalidVerdict(f"{key}={value} is out of range 0..{max_score}")
    if not isinstance(data["refusal"], bool):
        raise InvalidVerdict(f"refusal={data['refusal']!r} is not true or false")
    for key in ("evidence", "note"):
        if not isinstance(data[key], str):
            raise InvalidVerdict(f"{key} is not a string")
    return Verdict(
        data["faithfulness"], data["relevance"], data["refusal"], data["evidence"], data["note"]
    )


class Models:
    """The generator and the judge on one Ollama server."""

    def __init__(self, client: JsonClient, cfg: JudgeConfig, rubric: Rubric) -> None:
        self.client = client
        self.cfg = cfg
        self.rubric = rubric

    def run(self, question: str, context: PackedContext) -> ModelOutput:
        """Generate an answer from ``context`` only, then have the judge score it."""
        rendered = context.render()
        answer = self._answer(question, rendered).strip()
        messages = [
            {"role": "system", "content": self.rubric.judge_prompt},
            {"role": "user", "content": judge_request(question, rendered, answer)},
        ]
        failure = ""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            raw = chat(self.client, self.cfg.judge, messages, self._options(), json_format=True)
            try:
                verdict = parse_verdict(raw, self.rubric.max_score)
            except InvalidVerdict as exc:
                failure = str(exc)
                messages += [
                    {"role": "assistant", "content": raw},
                    {"role": "user", "content": repair_request(failure, self.rubric.max_score)},
                ]
                continue
            return ModelOutput(answer, verdict, None, attempt)
        return ModelOutput(answer, None, f"invalid judge output twice; last: {failure}", 2)

    def _answer(self, question: str, rendered: str) -> str:
        messages = [
            {"role": "system", "content": self.rubric.generator_prompt},
            {"role": "user", "content": f"Context:\n{rendered}\n\nQuestion: {question}"},
        ]
        options = {**self._options(), "num_predict": self.cfg.answer_tokens}
        return chat(self.client, self.cfg.generator, messages, options, json_format=False)

    def _options(self) -> dict[str, Any]:
        return {"temperature": 0, "seed": self.cfg.seed, "num_ctx": self.cfg.num_ctx}


def judge_request(question: str, rendered_context: str, answer: str) -> str:
    """The judge's user message: the question, the packed context and the answer."""
    return (
        f"Question:\n{question}\n\nContext:\n{rendered_context}\n\nAnswer:\n{answer}\n\n"
        "Reply with the JSON object only."
    )


def repair_request(problem: str, max_score: int) -> str:
    """The follow-up after an invalid verdict."""
    return (
        f"Your reply could not be used: {problem}. Reply again with one JSON object with "
        f"exactly these keys: faithfulness (integer 0-{max_score}), relevance (integer "
        f"0-{max_score}), refusal (true or false), evidence (string), note (string)."
    )
