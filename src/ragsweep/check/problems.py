"""What ``ragsweep check`` reports: problems, each with where it is, and how to find the
line of a key in a YAML file."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """One problem. ``where`` is ``file:line``, a file, ``command line`` or empty when the
    message already starts with its location (the loaders' messages do)."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (Hydra's run to many lines)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def key_line(path: Path, key: str) -> int | None:
    """The 1-based line of the first ``key:`` (any indentation, any list dash) in the YAML
    file ``path``, or None."""
    pattern = re.compile(rf"^[\s-]*['\"]?{re.escape(key)}['\"]?\s*:")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return next((n for n, line in enumerate(lines, start=1) if pattern.match(line)), None)


def located(path: Path, key: str) -> str:
    """``path:line`` of ``key`` in ``path``, or just ``path`` when the key is not there."""
    line = key_line(path, key)
    return f"{path}:{line}" if line else str(path)
