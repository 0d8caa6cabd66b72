"""Reading JSONL files of the judge stage (fixed answers, human verdicts, cases.jsonl) with
errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragsweep.core.errors import RagsweepError
from ragsweep.data.corpus import jsonl_lines


def read_jsonl(path: Path, error: type[RagsweepError]) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; ``error`` names the file and line
    of an unreadable file, invalid JSON or a line that is not an object."""
    try:
        lines = jsonl_lines(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror}") from None
    rows = []
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise error(f"{path}:{line_no}: invalid JSON: {exc}") from None
        if not isinstance(row, dict):
            raise error(f"{path}:{line_no}: expected a JSON object")
        rows.append((line_no, row))
    return rows
