"""Fixed answers (``judge.answers``): a JSONL file of ``{"id": ..., "answer": ...}`` lines
that takes the generator's place, so the judge grades exactly the answers a human graded.

Agreement between the judge and human verdicts only means something when both graded the
same answer; a generator produces different answers per model and version, a file does not.
The file's content digest identifies it in the judge cache and the run's tags; other keys
on a line (human verdict fields, notes) are ignored here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import sha256_json
from ragsweep.index.remote.chat import ServedChatModel
from ragsweep.judge.jsonl import read_jsonl

ANSWERS_SOURCE = "answers-file"


@dataclass(frozen=True)
class FixedAnswers:
    """Answer per case id, read from ``path``."""

    path: Path
    by_id: dict[str, str]

    @property
    def info(self) -> ServedChatModel:
        """The file's identity in place of a generator model's: its sha256 over the answers
        (ids and texts; formatting and other keys do not count)."""
        digest = sha256_json(sorted(self.by_id.items()))
        return ServedChatModel(
            f"answers:{self.path.name}", ANSWERS_SOURCE, digest, ANSWERS_SOURCE, "-"
        )

    def answer(self, case_id: str) -> str:
        try:
            return self.by_id[case_id]
        except KeyError:
            raise ConfigError(self._missing_message([case_id])) from None

    def check_covers(self, case_ids: Iterable[str]) -> None:
        """Fail (before any model call) when a case to be judged has no answer here."""
        missing = [c for c in case_ids if c not in self.by_id]
        if missing:
            raise ConfigError(self._missing_message(missing))

    def _missing_message(self, missing: list[str]) -> str:
        shown = ", ".join(missing[:8]) + (
            f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        )
        return (
            f"judge.answers={str(self.path)!r} has no answer for case(s) {shown}; add them, "
            "or evaluate a golden set or split it covers"
        )


def load_answers(path: str | Path) -> FixedAnswers:
    """Read and check a fixed-answers file: every line needs a unique string ``id`` and a
    string ``answer``."""
    path = Path(path)
    by_id: dict[str, str] = {}
    for line_no, row in read_jsonl(path, ConfigError):
        where = f"{path}:{line_no}"
        case_id, answer = row.get("id"), row.get("answer")
        if not isinstance(case_id, str) or not case_id:
            raise ConfigError(f"{where}: 'id' must be a non-empty string")
        if not isinstance(answer, str):
            raise ConfigError(f"{where}: case {case_id!r} needs an 'answer' string")
        if case_id in by_id:
            raise ConfigError(f"{where}: case {case_id!r} appears twice")
        by_id[case_id] = answer
    if not by_id:
        raise ConfigError(f"judge.answers={str(path)!r} holds no answers")
    return FixedAnswers(path, by_id)
