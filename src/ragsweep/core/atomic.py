"""Files that are either complete or absent, and clear errors when a run directory fills up.

Run artifacts (``cases.jsonl``, ``report.md``, ...) are written to a hidden temporary
sibling (``.<name>.tmp-<random>``) and renamed into place when complete, so a crash or a
full disk never leaves a truncated file under the real name.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from ragsweep.core.disk import is_out_of_space_error
from ragsweep.core.errors import OutputError


@contextmanager
def atomic_writer(path: Path, errors: str = "strict") -> Iterator[TextIO]:
    """A UTF-8 text handle whose content replaces ``path`` only once the block completes;
    on any error the temporary file is deleted and ``path`` is left as it was. ``errors``:
    the codec error handler for what UTF-8 cannot encode (lone surrogates)."""
    with _replacing(path) as tmp, tmp.open("w", encoding="utf-8", errors=errors) as handle:
        yield handle


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as a whole (see :func:`atomic_writer`)."""
    with atomic_writer(path) as handle:
        handle.write(text)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as a whole, like :func:`atomic_writer`."""
    with _replacing(path) as tmp:
        tmp.write_bytes(data)


@contextmanager
def _replacing(path: Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` that replaces it once the block completes; on any
    error it is deleted and ``path`` is left as it was."""
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextmanager
def run_dir_errors(output_dir: Path) -> Iterator[None]:
    """Turn an OSError while writing a run's artifacts into an OutputError that names the
    run directory and what to do (a full disk says so)."""
    try:
        yield
    except OSError as exc:
        if is_out_of_space_error(exc, output_dir):
            hint = (
                "the disk is full: free space, or point paths.output_dir (or hydra.run.dir) "
                "at a disk with room"
            )
        else:
            hint = "check that it exists and is writable"
        raise OutputError(
            f"run directory {output_dir}: cannot write the run's artifacts ({exc}); {hint}. "
            "Files already there are complete; nothing partial was left and nothing was logged"
        ) from exc
