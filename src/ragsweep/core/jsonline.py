"""Compact JSON lines, fast: the characters ``json.JSONEncoder(ensure_ascii=False,
separators=(",", ":"))`` writes, encoded by orjson where orjson writes the same.

orjson (MPL-2.0 AND (Apache-2.0 OR MIT)) encodes a ``cases.jsonl`` row about 7x faster than
the standard library. Its text differs from the standard library's in four places only, and
:func:`json_line` uses the standard library for those: a float below 1e-4 (``5e-6`` and
``0.00001`` where Python writes ``5e-06`` and ``1e-05``; before orjson 3.12 also ``1e16``
for ``1e+16``: a line with any exponent is recognized by its bytes), NaN and infinities
(orjson writes ``null``: the caller says whether the value's floats are all finite), and
what orjson refuses (a lone surrogate, an integer beyond 64 bits, a key
that is not a string, a numpy scalar).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

STDLIB_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""The encoder whose text :func:`json_line` reproduces."""

_SPELLED_OTHERWISE = re.compile(rb"\d[eE][-+]?\d|0\.0000\d")
"""A float orjson spells otherwise than Python, or may (any exponent: orjson 3.10 and 3.11
write ``1e16`` where Python writes ``1e+16``; 3.12+ agree, but the guard does not depend on
the installed version), or text that looks like one: then the line is encoded by the
standard library, at no cost to its bytes."""


def json_line(value: Any, finite: bool) -> str:
    """``value`` as one JSON line (ending in a newline), the same characters as
    ``STDLIB_LINE.encode(value) + "\\n"``. ``finite``: the caller knows that every float in
    ``value`` is finite (else the standard library encodes it)."""
    if finite:
        try:
            encoded = orjson.dumps(value)
        except TypeError:  # orjson.JSONEncodeError: what orjson does not encode
            encoded = b""
        if encoded and not _SPELLED_OTHERWISE.search(encoded):
            return encoded.decode("utf-8") + "\n"
    return STDLIB_LINE.encode(value) + "\n"
