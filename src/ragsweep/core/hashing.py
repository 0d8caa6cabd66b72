"""Canonical hashing: sha256 over canonical JSON, files and texts.

Cache keys and provenance tags are built from these, so the encoding must never depend on
dict order, float formatting quirks or the platform.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Any

_NATIVE = frozenset({str, int, float, bool, type(None)})
"""Types whose values are their own plain form (exactly these types: a subclass, such as a
``str`` enum, goes through the checks of :func:`_plain`)."""


def _plain(value: Any) -> Any:
    """Convert dataclasses, tuples, paths and enums into JSON-native values. The common
    values (strings, numbers, lists, tuples) are recognized by their exact type first: a
    rankings key lists every question of a run (thousands), and the general checks took
    about 0.1 s per thousand."""
    kind: Any = type(value)
    if kind in _NATIVE:
        return value
    if kind is list or kind is tuple:
        return [_plain(v) for v in value]
    names = _field_names(kind)
    if names is not None:
        return {name: _plain(getattr(value, name)) for name in names}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return value.as_posix()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float) and value.is_integer():
        return value  # json renders 1.0 as "1.0": stable, distinct from int 1 on purpose
    return value


@functools.cache
def _field_names(kind: type) -> tuple[str, ...] | None:
    """The field names of dataclass ``kind`` (None: not a dataclass), looked up once per
    class: the golden cases a scored result is keyed on are thousands of dataclasses, and
    ``dataclasses.fields`` per value was half of hashing them."""
    if not dataclasses.is_dataclass(kind):
        return None
    return tuple(f.name for f in dataclasses.fields(kind))


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    """sha256 hex digest of ``text`` as UTF-8 (a lone surrogate, which a JSON text can
    escape, as its three bytes: the digest of any other text is unchanged)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def sha256_json(value: Any) -> str:
    """sha256 hex digest of ``canonical_json(value)``."""
    return sha256_text(canonical_json(value))


def sha256_file(path: str | Path, chunk_bytes: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk_bytes):
            digest.update(block)
    return digest.hexdigest()


def sha256_parts(parts: Iterable[str]) -> str:
    """Digest of a sequence of strings, length-prefixed so that boundaries are unambiguous."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")  # as sha256_text
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def source_digest(*modules: ModuleType) -> str:
    """Digest of the source files of ``modules``: a cache key part that changes when the code
    that shapes a stage's output is edited."""
    files = []
    for module in modules:
        if module.__file__ is None:
            raise ValueError(f"module {module.__name__} has no source file")
        files.append(sha256_file(module.__file__))
    return sha256_parts(files)
