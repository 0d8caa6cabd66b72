"""One factor per axis: which result-affecting config values the values of an axis change.

The values of an axis are compared as composed configurations, on the result-affecting
values only (:func:`result_values`: what the config hash is made of, spelled as config
keys; tracking, paths, cache, run names, tags and other bookkeeping are not among them).
A value that differs between them is the axis' own when

- it is an axis key or lies under one (``chunking.size``; ``embedding.options`` for an
  ``embedding.options`` axis), or
- it lies under a config-group key of the axis and is the only value the group's options
  differ in (the ``preprocess`` options differ only in ``preprocess.steps``).

Anything else is another factor: the ``chunking`` options also set different sizes and
overlaps, so ``chunking: [fixed, heading]`` varies mode, size and overlap at once.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from ragsweep.config.schema import result_fields
from ragsweep.core.hashing import canonical_json
from ragsweep.run.config import ResolvedConfig, hashed_values
from ragsweep.sweep.spec import Axis, override_text

ABSENT = "(unset)"
"""How a value that one configuration does not have at all is shown."""

Factors = dict[str, dict[str, str]]
"""Config key → value label (``fixed``) → that value's setting of the key, as text."""

MAX_LISTED = 4
"""Keys listed with their values in a refusal or note (the rest are counted: all are in
``sweep_result.yaml``, ``other_factors``)."""


def result_values(resolved: ResolvedConfig) -> dict[str, Any]:
    """Every result-affecting value of a composed config by dotted key: exactly what the
    config hash is computed from (:func:`ragsweep.run.config.hashed_values`), with the
    embedding spelled as the config keys a user sets (backend, model and the options in the
    backend's identity), the preprocessing as its steps (the synonym file's digest, which
    the hash also covers, changes only with ``preprocess.synonyms_path``'s content) and an
    enabled reranker as its fields (``rerank.model`` as set, not the model's identity)."""
    cfg, model = resolved.cfg, resolved.model
    hashed = hashed_values(resolved)
    hashed["preprocess"] = result_fields(cfg.preprocess)  # the steps a user sets
    if "rerank" in hashed:
        hashed["rerank"] = result_fields(cfg.rerank)
    del hashed["embedding"]
    # any other identity object (a dataclass) as its fields, as the hash sees it
    values = _flatten(json.loads(canonical_json(hashed)))
    values["embedding.backend"] = cfg.embedding.backend
    values["embedding.model"] = cfg.embedding.model
    values.update(_flatten(model.options, "embedding.options."))
    return values


def _flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return flat


def varied(configs: Sequence[tuple[str, Mapping[str, Any]]]) -> Factors:
    """The keys whose values differ between the labelled ``configs``, in key order."""
    keys = sorted({key for _, values in configs for key in values})
    out: Factors = {}
    for key in keys:
        texts = {label: _text(values.get(key, ABSENT), key in values) for label, values in configs}
        if len(set(texts.values())) > 1:
            out[key] = texts
    return out


def _text(value: Any, present: bool) -> str:
    if not present:
        return ABSENT
    try:
        return override_text(value)
    except (TypeError, ValueError):
        return canonical_json(value)


def other_factors(axis: Axis, differences: Factors, groups: Collection[str]) -> Factors:
    """The ``differences`` that are not the axis' own (module docstring); ``groups``: the
    axis keys that are config groups."""
    own_values = [k for k in axis.keys if k not in groups]
    rest = {
        key: texts
        for key, texts in differences.items()
        if not any(key == own or key.startswith(f"{own}.") for own in own_values)
    }
    for group in (k for k in axis.keys if k in groups):
        inside = [key for key in rest if key.startswith(f"{group}.")]
        knobs = [key for key in inside if _is_knob(rest[key])]
        if len(inside) == 1:  # the one value the group's options stand for
            knobs = []
        for key in inside:
            if key not in knobs:
                del rest[key]
    return rest


def _is_knob(texts: Mapping[str, str]) -> bool:
    """A key every compared configuration sets to a number: a setting of its own (chunk
    size, overlap, a depth), not part of what an option is."""
    return all(_is_number(text) for text in texts.values())


def _is_number(text: str) -> bool:
    if text in ("true", "false"):
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def refusal_hint(axis: Axis, found: Factors) -> str:
    """The fix for an axis that changes ``found`` besides its own values."""
    held = " and ".join(found) if len(found) <= 3 else f"{', '.join(list(found)[:3])}, ..."
    return (
        f"Hold {held} in the baseline (sweep them as axes of their own), or keep the values "
        "as they are with the long form {values: {key: [values]}, allow_multi_factor: true} "
        "(docs/sweeps.md)"
    )


def describe(factors: Factors, limit: int | None = None) -> list[str]:
    """One line per key: ``chunking.size = 800 for fixed, paragraph; 1200 for heading``;
    with ``limit``, the first ``limit`` keys and ``... and N more``."""
    lines = []
    listed = list(factors.items())[:limit]
    for key, texts in listed:
        by_value: dict[str, list[str]] = {}
        for label, text in texts.items():
            by_value.setdefault(text, []).append(label)
        parts = "; ".join(f"{text} for {', '.join(labels)}" for text, labels in by_value.items())
        lines.append(f"{key} = {parts}")
    if len(factors) > len(listed):
        lines.append(f"... and {len(factors) - len(listed)} more")
    return lines
