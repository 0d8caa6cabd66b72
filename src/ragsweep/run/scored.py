"""The ``scores`` stage: a run's scored results (every case's result and the summary with its
intervals), cached by exactly what they are computed from.

Scoring reads the rankings, the chunks they index, the golden cases of the split, the corpus
(evidence and access metadata), the evaluation settings and the scoring code; a job whose
inputs are all unchanged (a warm re-sweep) reuses its scored result instead of scoring
again, and its case files (``case_files``, written by :mod:`ragsweep.run.files`) are
copied from the entry the first run wrote. Changing ``eval.ks`` or ``eval.budgets`` changes
the key and re-scores, from the cached rankings. The entry is JSON with every float written
as its shortest round-trip form, so a hit gives the same values, bit for bit, as scoring
again (docs/caching.md, "Scored results").
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from ragsweep.cache.entries import write_json
from ragsweep.cache.stage import StageCache
from ragsweep.chunk import table as chunk_table
from ragsweep.chunk import views as chunk_views
from ragsweep.config.schema import EvalConfig, GoldenConfig, result_fields
from ragsweep.core.hashing import sha256_file, sha256_json, sha256_parts, source_digest
from ragsweep.data import access, golden, quotes, splits
from ragsweep.data.golden import GoldenCase
from ragsweep.eval import scoring
from ragsweep.eval.scoring import CaseResult, Summary
from ragsweep.index.base import Ranked

SCORES_STAGE = "scores"
"""The stage cache's entries of scored results (:func:`cached_scores`)."""

_DATA = "scored.json"


def rankings_digest(ranked: Sequence[Ranked]) -> str:
    """sha256 of every ranking as scored: chunk indices, scores, search seconds and stage
    times, in case order (reranked rankings included: they are what is scored)."""
    empty = np.empty(0)
    indices = np.concatenate([r.indices for r in ranked] or [empty]).astype("<i8")
    scores = np.concatenate([r.scores for r in ranked] or [empty]).astype("<f8")
    digest = hashlib.sha256(indices.tobytes())
    digest.update(scores.tobytes())
    rest = [[len(r.indices), r.seconds, r.stages] for r in ranked]
    digest.update(json.dumps(rest, separators=(",", ":")).encode())
    return digest.hexdigest()


def scores_key(
    ranked: Sequence[Ranked],
    chunk_set: str,
    inputs: Mapping[str, Any],
    eval_cfg: EvalConfig,
    top_k: int,
    complete: bool = True,
) -> str:
    """Key of a scored result: the rankings (:func:`rankings_digest`) and the chunk set
    they index, ``inputs`` (:func:`golden_inputs`), every evaluation setting that changes a
    value or an interval (``eval.*`` but the objective), the retrieval depth, the scoring
    code (every module of :mod:`ragsweep.eval`, the chunk table's columns and this module)
    and, when False, ``complete`` (the chunks are not the run's whole chunking, so span
    traces leave the hitting chunk unknown; left out when True: keys as before)."""
    key = {
        "rankings": rankings_digest(ranked),
        "chunk_set": chunk_set,
        "inputs": dict(inputs),
        "eval": {
            **result_fields(eval_cfg),
            "bootstrap_resamples": eval_cfg.bootstrap_resamples,
            "seed": eval_cfg.seed,
        },
        "top_k": top_k,
        "code": scoring_digest(),
    }
    return sha256_json(key if complete else {**key, "complete": False})


def golden_inputs(
    cases: Sequence[GoldenCase], golden_digest: str, golden_cfg: GoldenConfig, corpus_hash: str
) -> dict[str, Any]:
    """The golden set's part of :func:`scores_key`: the selected cases themselves (every
    field of every case, as parsed: evidence spans, scope, principal, origin, type, split,
    question...), its file's bytes, how it is read (split assignment) and the corpus its
    quotes and evidence are resolved against (texts and access metadata). Keying on the
    parsed cases covers a change in the parsing code or a field added to
    :class:`~ragsweep.data.golden.GoldenCase`; :func:`scoring_digest` covers the parsing
    code as well."""
    return {
        "cases": sha256_json(list(cases)),
        "golden": golden_digest,
        "config": result_fields(golden_cfg),
        "corpus": corpus_hash,
    }


@functools.cache
def scoring_digest() -> str:
    """Digest of the code that scores and summarizes (see :func:`scores_key`) and of the
    code that reads the golden set and access metadata (``data/golden*.py``,
    ``data/quotes.py``, ``data/splits.py``, ``data/access.py``), as
    :mod:`ragsweep.data.corpus_cache` keys on the corpus parser; numpy's version, since
    the intervals' resamples come from its ``Generator.integers``."""
    package = sorted(Path(scoring.__file__).parent.glob("*.py"))
    reading = sorted(Path(golden.__file__).parent.glob("golden*.py"))
    own = source_digest(chunk_table, chunk_views, quotes, splits, access, sys.modules[__name__])
    return sha256_parts(
        [*(sha256_file(path) for path in [*package, *reading]), own, f"numpy {np.__version__}"]
    )


def cached_scores(
    cache: StageCache,
    key: str,
    cases: Sequence[GoldenCase],
    score: Callable[[], tuple[tuple[CaseResult, ...], Summary]],
) -> tuple[tuple[CaseResult, ...], Summary]:
    """The scored result of ``key``: read from the ``scores`` entry, or ``score()``d and
    stored. An entry whose cases are not ``cases`` (ids, in order) is malformed: removed
    and scored again."""
    computed: list[tuple[tuple[CaseResult, ...], Summary]] = []

    def build(folder: Path) -> None:
        computed.append(score())
        write_json(folder / _DATA, encode_scored(*computed[0]))

    def load(folder: Path) -> tuple[tuple[CaseResult, ...], Summary]:
        if computed:
            return computed[0]
        results, summary = decode_scored(load_json((folder / _DATA).read_bytes()))
        if [r.id for r in results] != [c.id for c in cases]:
            raise ValueError("the stored results are not those of the run's cases")
        return results, summary

    return cache.get_or_build(SCORES_STAGE, key, build, load)


# --- the entry's JSON -----------------------------------------------------------------


def load_json(data: bytes) -> Any:
    """The JSON value of ``data``, by orjson (~3x faster), or by the standard library when
    it holds what only the standard library reads (``NaN``, ``Infinity``)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def encode_scored(results: Sequence[CaseResult], summary: Summary) -> dict[str, Any]:
    """``results`` and ``summary`` as JSON values, every dataclass field of
    :class:`~ragsweep.eval.scoring.CaseResult` and :class:`~ragsweep.eval.scoring.Summary`
    by its name (a field added later is stored too; lossless: see :func:`decode_scored`)."""
    case_codecs, summary_codecs = _codecs(CaseResult), _codecs(Summary)
    return {
        "results": [
            {name: enc(getattr(r, name)) for name, (enc, _) in case_codecs.items()} for r in results
        ],
        "summary": {name: enc(getattr(summary, name)) for name, (enc, _) in summary_codecs.items()},
    }


def decode_scored(value: Mapping[str, Any]) -> tuple[tuple[CaseResult, ...], Summary]:
    """Inverse of :func:`encode_scored`. Raises KeyError, TypeError or ValueError on a value
    it did not write (the cache then treats the entry as corrupt)."""
    case_codecs, summary_codecs = _codecs(CaseResult), _codecs(Summary)
    results = tuple(
        CaseResult(**{name: dec(row[name]) for name, (_, dec) in case_codecs.items()})
        for row in value["results"]
    )
    s = value["summary"]
    summary = Summary(**{name: dec(s[name]) for name, (_, dec) in summary_codecs.items()})
    return results, summary


Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]
"""How one value is written as JSON and read back: (encode, decode)."""


def _same(value: Any) -> Any:
    return value


_PLAIN: Codec = (_same, _same)


@functools.cache
def _codecs(cls: type) -> dict[str, Codec]:
    """Field name → codec of every field of dataclass ``cls``, from its annotations."""
    hints = typing.get_type_hints(cls)
    return {f.name: _codec(hints[f.name]) for f in dataclasses.fields(cls)}


def _codec(kind: Any) -> Codec:
    """The codec of a value annotated ``kind``: JSON values as they are; a dataclass of
    plain fields (:class:`Bounds`, :class:`Bootstrap`) as the list of its fields; a tuple of
    named tuples by column (a case's ten retrieved chunks as five lists: faster to write
    and read than ten objects); dicts and optional values through their parts."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        names = [f.name for f in dataclasses.fields(kind)]
        return (lambda v: [getattr(v, n) for n in names], lambda v: kind(*v))
    if origin is dict:
        enc, dec = _codec(args[1])
        if enc is _same:
            return _PLAIN
        return (
            lambda v: {k: enc(x) for k, x in v.items()},
            lambda v: {k: dec(x) for k, x in v.items()},
        )
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis and _is_named_tuple(args[0]):
        make = args[0]._make  # tuple.__new__: no Python-level __new__ per row
        return (
            lambda v: list(zip(*v, strict=True)),
            lambda v: tuple(map(make, zip(*v, strict=True))),
        )
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        enc, dec = _codec(inner)
        if enc is _same:
            return _PLAIN
        return (
            lambda v: None if v is None else enc(v),
            lambda v: None if v is None else dec(v),
        )
    return _PLAIN


def _is_named_tuple(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields")
