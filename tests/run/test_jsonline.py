"""json_line writes the standard library's characters, through orjson where it can; canonical
JSON (cache keys) is the same through the fast path of plain values."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import NamedTuple

import pytest

from ragsweep.core.hashing import canonical_json
from ragsweep.core.jsonline import _SPELLED_OTHERWISE, STDLIB_LINE, json_line


@pytest.mark.parametrize(
    "value",
    [
        {"id": "q1", "text": 'caf\u00e9 \u2028 \x7f \x1f "quoted" \\', "n": 3, "x": None},
        {"m": [0.1 + 0.2, 1e-05, 5e-06, 2.5e-07, 1e16, 1e-4, -0.0, 123.456]},
        {"m": [1e16, 0.5]},  # alone: 1e-05 above sends its whole line to the fallback
        {"m": [1e22, 0.5]},
        {"text": "1e-5 and 0.00001 in words"},
        {"big": 2**70},
        {"surrogate": "\udc80"},
        {1: "not a string key"},
    ],
)
def test_the_same_characters_as_the_standard_library(value: object) -> None:
    assert json_line(value, finite=True) == STDLIB_LINE.encode(value) + "\n"


@pytest.mark.parametrize("spelled", [b"1e16", b"1E22", b"1e+16", b"5e-6", b"0.00001"])
def test_any_exponent_goes_to_the_standard_library(spelled: bytes) -> None:
    """What orjson before 3.12 writes for 1e16 (``1e16``, Python: ``1e+16``) must not be
    trusted whatever the installed orjson writes."""
    assert _SPELLED_OTHERWISE.search(b'{"m":[' + spelled + b"]}")


def test_non_finite_floats_are_left_to_the_standard_library() -> None:
    value = {"m": [float("nan"), float("inf")]}
    assert json_line(value, finite=False) == '{"m":[NaN,Infinity]}\n'


class Colour(str, Enum):
    RED = "red"


class Pair(NamedTuple):
    left: int
    right: float


def test_canonical_json_of_plain_and_other_values() -> None:
    """The exact-type fast path of hashing._plain gives what the general checks give."""
    value = {
        "b": [1, 1.0, 0.5, True, None, "s", ("t", [2])],
        "a": {"colour": Colour.RED, "pair": Pair(1, 2.0), "path": Path("x/y")},
    }
    assert canonical_json(value) == (
        '{"a":{"colour":"red","pair":[1,2.0],"path":"x/y"},"b":[1,1.0,0.5,true,null,"s",["t",[2]]]}'
    )
