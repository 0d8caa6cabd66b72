"""Lone surrogates: code points a JSON string can escape (``"\\ud800"``) that are not
Unicode characters. Python parses them into a ``str`` that UTF-8 cannot encode, so a
text holding one would fail far from where it was read (writing a cache entry or a run's
files); the readers of a user's JSON (corpus, golden set, SQuAD import, external runs)
refuse it where it is read instead.

A file decoded strictly as UTF-8 cannot hold a surrogate (the golden reader decodes with
``surrogateescape`` but refuses the U+DC80-U+DCFF it makes before parsing), so only a JSON
escape of one (``\\uD800``-``\\uDFFF``) can put one in a parsed value; a text without such an
escape is not looked into. A pair of escapes (``"\\ud83d\\ude00"``) is one character and is
accepted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(source: str | bytes, value: Any) -> str | None:
    """Where ``value`` (parsed from the JSON text ``source``, a line or a whole file, as
    text or UTF-8 bytes) holds a lone surrogate, as a message naming the field, the code
    point and its 1-based character position in that string; None when it holds none."""
    if not _has_surrogate_escape(source):  # the common case
        return None
    for field, text in _strings(value, ""):
        found = _LONE_SURROGATE.search(text)
        if found is not None:
            return (
                f"{field or 'the value'} holds a lone surrogate (\\u{ord(found.group()):04x} "
                f"at character {found.start() + 1}), which is not a Unicode character: write "
                "the character it stands for (a character beyond U+FFFF is a pair of escapes, "
                "high then low) or remove the escape"
            )
    return None


def _has_surrogate_escape(source: str | bytes) -> bool:
    """Whether ``source`` holds a JSON escape of a surrogate (one regex search, in C)."""
    if isinstance(source, bytes):
        return _SURROGATE_ESCAPE_BYTES.search(source) is not None
    return _SURROGATE_ESCAPE.search(source) is not None


def _strings(value: Any, field: str) -> Iterator[tuple[str, str]]:
    """Every string in a parsed JSON value, keys included, with the field it is in
    (``'text'``, ``'metadata'.'source'``, ``'evidence'[0]``)."""
    if isinstance(value, str):
        yield field, value
    elif isinstance(value, dict):
        for key, item in value.items():
            inner = f"{field}.{key!r}" if field else repr(key)
            yield f"a key of {field}" if field else "a key", key
            yield from _strings(item, inner)
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from _strings(item, f"{field}[{number}]")
