"""The judge's verdict: its JSON schema (sent to servers that can constrain output to it) and
its strict validation (the same rules, checked on every reply, whatever the server claims).

A verdict is one JSON object with exactly the keys ``faithfulness`` and ``relevance``
(integers 0..``max_score``), ``refusal`` (true/false), ``evidence`` and ``note`` (strings).
A reply that breaks any rule raises :class:`InvalidVerdict` with a ``kind``:

- ``not_json``: the reply is not one JSON value;
- ``schema``: JSON, but a key is missing or unexpected, or a value has the wrong type or is
  out of range (``"evidence": false``, ``"faithfulness": 3``, ``"relevance": 2.0``);
- ``truncated``: the server stopped at the token cap (``judge.verdict_tokens``) before the
  reply was complete.

One lexical slip is tolerated: raw control characters (a line break) inside a string, which
JSON forbids but grammar-constrained servers emit (llama-cpp-python 0.3.36 with Gemma 3
does in almost every reply). They change no value's type; keys, types and ranges stay
strict.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ragsweep.judge.config import SCORES

NOT_JSON, SCHEMA, TRUNCATED = "not_json", "schema", "truncated"
SCHEMA_KINDS = frozenset({NOT_JSON, SCHEMA})
"""Invalid-reply kinds that a server honouring the JSON schema cannot produce."""


@dataclass(frozen=True)
class FieldRule:
    """One verdict key: its JSON-schema fragment (given ``max_score``), a check of a parsed
    value, and the words an error uses for what was expected."""

    schema: Callable[[int], dict[str, Any]]
    check: Callable[[Any, int], bool]
    expected: Callable[[int], str]


def _is_score(value: Any, max_score: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= max_score


SCORE_RULE = FieldRule(
    schema=lambda m: {"type": "integer", "minimum": 0, "maximum": m},
    check=_is_score,
    expected=lambda m: f"an integer in 0..{m}",
)
BOOLEAN_RULE = FieldRule(
    schema=lambda m: {"type": "boolean"},
    check=lambda v, m: isinstance(v, bool),
    expected=lambda m: "true or false",
)
STRING_RULE = FieldRule(
    schema=lambda m: {"type": "string"},
    check=lambda v, m: isinstance(v, str),
    expected=lambda m: "a string",
)
RULES: dict[str, FieldRule] = {
    **dict.fromkeys(SCORES, SCORE_RULE),
    "refusal": BOOLEAN_RULE,
    "evidence": STRING_RULE,
    "note": STRING_RULE,
}
VERDICT_KEYS = tuple(RULES)


def verdict_schema(max_score: int) -> dict[str, Any]:
    """The JSON schema of a verdict with scores in ``0..max_score``."""
    return {
        "type": "object",
        "properties": {key: rule.schema(max_score) for key, rule in RULES.items()},
        "required": list(VERDICT_KEYS),
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class Verdict:
    """A valid judge verdict: scores in ``0..rubric.max_score``, whether the answer is a
    refusal, the quote the judge rests on and its short note."""

    faithfulness: int
    relevance: int
    refusal: bool
    evidence: str
    note: str


class InvalidVerdict(ValueError):
    """Judge output that cannot be scored; ``kind`` is one of ``not_json``, ``schema``,
    ``truncated`` and the message says what is wrong."""

    def __init__(self, kind: str, problem: str) -> None:
        super().__init__(problem)
        self.kind = kind


def parse_verdict(text: str, max_score: int, truncated: bool = False) -> Verdict:
    """Validate the judge's raw reply (``truncated``: the server stopped at its token cap);
    raises :class:`InvalidVerdict` naming the problem."""
    try:
        data = json.loads(text, strict=False)  # strict=False: control characters in strings
    except json.JSONDecodeError as exc:
        if truncated:
            raise InvalidVerdict(
                TRUNCATED, f"cut off at the token cap after {len(text)} characters"
            ) from None
        raise InvalidVerdict(
            NOT_JSON, f"not valid JSON ({exc.msg} at position {exc.pos})"
        ) from None
    if not isinstance(data, dict):
        raise InvalidVerdict(SCHEMA, f"a JSON {type(data).__name__}, not an object")
    missing = [k for k in VERDICT_KEYS if k not in data]
    if missing:
        raise InvalidVerdict(SCHEMA, f"missing key(s): {', '.join(missing)}")
    unexpected = sorted(set(data) - set(VERDICT_KEYS))
    if unexpected:
        raise InvalidVerdict(SCHEMA, f"unexpected key(s): {', '.join(unexpected)}")
    for key, rule in RULES.items():
        if not rule.check(data[key], max_score):
            raise InvalidVerdict(SCHEMA, f"{key}={data[key]!r} is not {rule.expected(max_score)}")
    return Verdict(**{key: data[key] for key in VERDICT_KEYS})
