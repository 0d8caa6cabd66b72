"""How a run directory's files are stored as MLflow artifacts, and how readers get them back.

The run directory keeps every file plain. In the store, the two large per-case files,
``cases.jsonl`` and ``chunks.jsonl`` (:data:`COMPRESSED_FILES`), are gzip-compressed as
``cases.jsonl.gz`` and ``chunks.jsonl.gz``: JSON lines repeat their keys on every row, so
they shrink three- to sixfold (a SQuAD run's ``cases.jsonl`` 5.7 MB → 0.88 MB,
``chunks.jsonl`` 0.78 MB → 0.26 MB), which keeps a SQuAD run's artifacts small (docs/tracking.md).
:func:`artifact_text` reads either form, so runs logged before the files were compressed
are still read. MLflow is imported only inside the functions that need it.
"""

from __future__ import annotations

import gzip
import tempfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any

CASES_FILE = "cases.jsonl"
"""Per-case results of a run (one ``CaseResult`` row per line, :mod:`ragsweep.evaluate`)."""
CHUNKS_FILE = "chunks.jsonl"
"""The chunks some case retrieved, with their text (:func:`ragsweep.artifacts.chunk_row`)."""
COMPRESSED_FILES = frozenset({CASES_FILE, CHUNKS_FILE})
"""Run-directory file names stored gzip-compressed, under :func:`stored_name`."""
GZIP_SUFFIX = ".gz"
GZIP_LEVEL = 6
"""zlib's default level. On a SQuAD run's ``cases.jsonl`` (5.7 MB) it gives 883 kB in 0.17 s;
level 9 saves 2 % more at twice the time, level 1 is 33 % larger."""


def stored_name(name: str) -> str:
    """The artifact file name a run-directory file ``name`` is stored under."""
    return name + GZIP_SUFFIX if name in COMPRESSED_FILES else name


def stored_copy(path: Path, folder: Path) -> Path:
    """``path`` as it is stored: itself, or for a :data:`COMPRESSED_FILES` name its gzip
    copy written into ``folder`` under :func:`stored_name` (no timestamp or file name in
    the gzip header, so the same file always compresses to the same bytes)."""
    if path.name not in COMPRESSED_FILES:
        return path
    target = folder / stored_name(path.name)
    target.write_bytes(gzip.compress(path.read_bytes(), GZIP_LEVEL, mtime=0))
    return target


def artifact_text(client: Any, run_id: str, path: str) -> str:
    """The UTF-8 text of run ``run_id``'s artifact ``path`` (a run-directory file name such
    as ``cases.jsonl``), read through the MLflow ``client``: its gzip-compressed form when
    the name is compressed and the run has it, else the plain file (runs logged before
    compression). A FileNotFoundError when the run has neither, an OSError when the stored
    file cannot be read or decompressed."""
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
