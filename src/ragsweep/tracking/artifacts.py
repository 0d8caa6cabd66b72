"""How a run directory's files are stored as MLflow artifacts, and how readers get them back.

The run directory keeps every file plain and whole. In the store, each per-case value is
kept once, so a SQuAD run stays within its artifact budget (docs/tracking.md, "Artifact
budget"): ``cases_table.json`` (the MLflow table the UI shows) holds what a reader looks
at, and ``cases.jsonl`` is stored as ``cases.jsonl.gz`` with only the rest of each row
(:func:`ragsweep.eval.case_table.stored_case_row`: id, split, latency, every per-case metric,
the judge's record), gzip-compressed. ``chunks.jsonl`` (the retrieved chunks with their
whole text) and the ranks below the first stay in the run directory (not uploaded,
:data:`LOCAL_ONLY_FILES`); the table shows each case's top chunk and an excerpt of it.

:func:`artifact_text` gives readers a ``cases.jsonl`` text back: the stored rows joined
with the table (:func:`ragsweep.eval.case_table.rebuilt_case_row`), or, for runs logged before,
their whole rows from ``cases.jsonl.gz`` or the plain ``cases.jsonl``. MLflow is imported
only inside the functions that need it.
"""

from __future__ import annotations

import gzip
import json
import tempfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

from ragsweep.core.names import CASES_FILE, CHUNKS_FILE, TABLE_FILE
from ragsweep.data.corpus import jsonl_lines
from ragsweep.eval.case_table import is_stored_row, rebuilt_case_row, stored_case_row

COMPRESSED_FILES = frozenset({CASES_FILE, CHUNKS_FILE})
"""Run-directory file names stored gzip-compressed, under :func:`stored_name` (runs logged
before ``chunks.jsonl`` stayed local stored it compressed too)."""
LOCAL_ONLY_FILES = frozenset({CHUNKS_FILE})
"""Run-directory files not uploaded: their size grows with the chunk size and the
retrieval depth, not only with the cases (docs/tracking.md, "Artifact budget")."""
GZIP_SUFFIX = ".gz"
GZIP_LEVEL = 6
"""zlib's default level. On a SQuAD run's whole ``cases.jsonl`` (5.7 MB) it gave 883 kB in
0.17 s; level 9 saves 2 % more at twice the time, level 1 is 33 % larger."""
_JSON_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def stored_name(name: str) -> str:
    """The artifact file name a run-directory file ``name`` is stored under."""
    return name + GZIP_SUFFIX if name in COMPRESSED_FILES else name


def stored_copy(path: Path, folder: Path) -> Path:
    """``path`` as it is stored: itself, or for a :data:`COMPRESSED_FILES` name its gzip
    copy written into ``folder`` under :func:`stored_name` (no timestamp or file name in
    the gzip header, so the same file always compresses to the same bytes); a
    ``cases.jsonl`` keeps only what the table does not show of each row."""
    if path.name not in COMPRESSED_FILES:
        return path
    data = path.read_bytes()
    if path.name == CASES_FILE:
        data = _stored_cases(data.decode("utf-8")).encode("utf-8")
    target = folder / stored_name(path.name)
    target.write_bytes(gzip.compress(data, GZIP_LEVEL, mtime=0))
    return target


def _stored_cases(text: str) -> str:
    return "".join(
        _JSON_LINE.encode(stored_case_row(json.loads(line))) + "\n"
        for line in jsonl_lines(text)
        if line.strip()
    )


def artifact_text(client: Any, run_id: str, path: str) -> str:
    """The UTF-8 text of run ``run_id``'s artifact ``path`` (a run-directory file name such
    as ``cases.jsonl``), read through the MLflow ``client``: its gzip-compressed form when
    the name is compressed and the run has it, else the plain file (runs logged before
    compression). A stored ``cases.jsonl`` is joined with the run's table into whole rows
    (module docstring). A FileNotFoundError when the run has neither, an OSError when the
    stored file cannot be read or decompressed."""
    text = _stored_text(client, run_id, path)
    if PurePosixPath(path).name == CASES_FILE:
        return _rebuilt_cases(client, run_id, text)
    return text


def _stored_text(client: Any, run_id: str, path: str) -> str:
    candidates = [path]
    if PurePosixPath(path).name in COMPRESSED_FILES:
        candidates.insert(0, path + GZIP_SUFFIX)
    missing: list[str] = []
    for candidate in candidates:
        data = _download(client, run_id, candidate, missing)
        if data is None:
            continue
        if candidate.endswith(GZIP_SUFFIX):
            data = _decompressed(data, f"{candidate} of run {run_id}")
        return data.decode("utf-8")
    raise FileNotFoundError(
        f"run {run_id} has no artifact {' or '.join(map(repr, candidates))} ({'; '.join(missing)})"
    )


def _rebuilt_cases(client: Any, run_id: str, text: str) -> str:
    """The whole ``cases.jsonl`` rows of a stored ``cases.jsonl`` text (unchanged when it
    already has them: runs logged before)."""
    try:
        stored = [json.loads(line) for line in jsonl_lines(text) if line.strip()]
    except ValueError:
        return text  # the reader reports the line that is not a case
    if not stored or not all(isinstance(r, dict) and is_stored_row(r) for r in stored):
        return text
    where = f"{TABLE_FILE} of run {run_id}"
    try:
        table = json.loads(_stored_text(client, run_id, TABLE_FILE))
        columns, data = table["columns"], table["data"]
        if len(data) != len(stored):
            raise ValueError(f"{len(data)} rows for {len(stored)} cases")
        rows = [
            rebuilt_case_row(row, dict(zip(columns, cells, strict=True)))
            for row, cells in zip(stored, data, strict=True)
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise OSError(f"{where} does not match its cases.jsonl.gz ({exc!r})") from exc
    return "".join(_JSON_LINE.encode(row) + "\n" for row in rows)


def _download(client: Any, run_id: str, path: str, missing: list[str]) -> bytes | None:
    """The bytes of artifact ``path``, or None (the reason appended to ``missing``)."""
    from mlflow.exceptions import MlflowException

    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = client.download_artifacts(run_id, path, tmp)
        except (MlflowException, OSError) as exc:
            missing.append(str(exc))
            return None
        return Path(local).read_bytes()


def _decompressed(data: bytes, source: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise OSError(f"{source} is not a readable gzip file ({exc})") from exc
