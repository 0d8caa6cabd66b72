"""json_line writes the standard library's characters, through orjson where it can."""

from __future__ import annotations

import pytest

from ragsweep.core.jsonline import STDLIB_LINE, json_line


@pytest.mark.parametrize(
    "value",
    [
        {"id": "q1", "text": 'caf\u00e9 \u2028 \x7f \x1f "quoted" \\', "n": 3, "x": None},
        {"m": [0.1 + 0.2, 1e-05, 5e-06, 2.5e-07, 1e16, 1e-4, -0.0, 123.456]},
        {"text": "1e-5 and 0.00001 in words"},
        {"big": 2**70},
        {"surrogate": "\udc80"},
        {1: "not a string key"},
    ],
)
def test_the_same_characters_as_the_standard_library(value: object) -> None:
    assert json_line(value, finite=True) == STDLIB_LINE.encode(value) + "\n"


def test_non_finite_floats_are_left_to_the_standard_library() -> None:
    value = {"m": [float("nan"), float("inf")]}
    assert json_line(value, finite=False) == '{"m":[NaN,Infinity]}\n'
