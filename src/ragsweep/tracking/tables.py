"""MLflow table artifacts: JSON files the MLflow UI shows as tables.

A table is ``{"columns": [...], "data": [[...], ...]}`` (pandas' ``orient="split"`` without
the index, what ``MlflowClient.log_table`` writes), and a run lists its tables in MLflow's
``mlflow.loggedArtifacts`` tag as ``[{"path": "figures.json", "type": "table"}, ...]``
(``log_table`` appends to that tag the same way; ``load_table`` finds runs by it). Writing
the files into the run directory and the tag into the run's tags lets the whole run go to
MLflow in one upload, without ``log_table``'s extra round trips per table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragsweep.core import tags as tag
from ragsweep.core.atomic import write_text_atomic

TABLE = "table"


def write_table(path: Path, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    """Write a table artifact (module docstring) to ``path``; every row has one value per
    column."""
    data = [list(row) for row in rows]
    for number, row in enumerate(data):
        if len(row) != len(columns):
            raise ValueError(f"{path.name}: row {number} has {len(row)} values, not {len(columns)}")
    text = json.dumps(
        {"columns": list(columns), "data": data}, ensure_ascii=False, separators=(",", ":")
    )
    write_text_atomic(path, text + "\n")
    return path


def read_table(text: str, source: str) -> list[dict[str, Any]]:
    """The rows of a table artifact's text as ``{column: value}``; a ValueError naming
    ``source`` for anything else."""
    try:
        table = json.loads(text)
        columns = [str(c) for c in table["columns"]]
        return [dict(zip(columns, row, strict=True)) for row in table["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{source} is not an MLflow table ({exc!r})") from exc


def logged_tables_tag(paths: Iterable[str], tags: Mapping[str, str] | None = None) -> str:
    """The ``mlflow.loggedArtifacts`` value listing the tables at artifact ``paths``, added
    to the entries already in ``tags`` (if any), each entry once."""
    entries = json.loads((tags or {}).get(tag.LOGGED_ARTIFACTS, "[]"))
    for path in paths:
        entry = {"path": path, "type": TABLE}
        if entry not in entries:
            entries.append(entry)
    return json.dumps(entries)  # MLflow's separators: load_table's LIKE pattern relies on them
