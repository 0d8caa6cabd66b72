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

import functools
import hashlib
import json
import sys
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
from ragsweep.data.golden import GoldenCase
from ragsweep.eval import scoring
from ragsweep.eval.scoring import CaseResult, RetrievedChunk, Summary
from ragsweep.eval.uncertainty import Bootstrap, Bounds
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
) -> str:
    """Key of a scored result: the rankings (:func:`rankings_digest`) and the chunk set
    they index, ``inputs`` (:func:`golden_inputs`), every evaluation setting that changes a
    value or an interval (``eval.*`` but the objective), the retrieval depth and the
    scoring code (every module of :mod:`ragsweep.eval`, the chunk table's columns and this
    module)."""
    return sha256_json(
        {
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
    )


def golden_inputs(golden_digest: str, golden_cfg: GoldenConfig, corpus_hash: str) -> dict[str, Any]:
    """The golden set's part of :func:`scores_key`: its file's bytes, how it is read
    (split assignment) and the corpus its quotes and evidence are resolved against."""
    return {"golden": golden_digest, "config": result_fields(golden_cfg), "corpus": corpus_hash}


@functools.cache
def scoring_digest() -> str:
    """Digest of the code that scores and summarizes (see :func:`scores_key`)."""
    package = sorted(Path(scoring.__file__).parent.glob("*.py"))
    own = source_digest(chunk_table, chunk_views, sys.modules[__name__])
    return sha256_parts([*(sha256_file(path) for path in package), own])


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
    """``results`` and ``summary`` as JSON values (lossless: see :func:`decode_scored`)."""
    return {
        "results": [
            [
                r.id,
                r.type,
                r.split,
                r.answerable,
                r.metrics,
                list(zip(*r.retrieved, strict=True)),
                r.seconds,
            ]
            for r in results
        ],
        "summary": {
            "overall": summary.overall,
            "by_type": summary.by_type,
            "by_type_min": summary.by_type_min,
            "counts": summary.counts,
            "type_counts": summary.type_counts,
            "scored_counts": summary.scored_counts,
            "extra": summary.extra,
            "intervals": _bounds(summary.intervals),
            "by_type_intervals": {t: _bounds(b) for t, b in summary.by_type_intervals.items()},
            "by_type_min_intervals": _bounds(summary.by_type_min_intervals),
            "bootstrap": [summary.bootstrap.resamples, summary.bootstrap.seed],
            "top_k": summary.top_k,
            "ran_out_at_depth": summary.ran_out_at_depth,
        },
    }


def decode_scored(value: Mapping[str, Any]) -> tuple[tuple[CaseResult, ...], Summary]:
    """Inverse of :func:`encode_scored`. Raises KeyError, TypeError or ValueError on a value
    it did not write (the cache then treats the entry as corrupt)."""
    make_chunk = RetrievedChunk._make  # tuple.__new__: no Python-level __new__ per chunk
    results = tuple(
        CaseResult(
            id=row[0],
            type=row[1],
            split=row[2],
            answerable=row[3],
            metrics=row[4],
            retrieved=tuple(map(make_chunk, zip(*row[5], strict=True))),
            seconds=row[6],
        )
        for row in value["results"]
    )
    s = value["summary"]
    summary = Summary(
        overall=s["overall"],
        by_type=s["by_type"],
        by_type_min=s["by_type_min"],
        counts=s["counts"],
        type_counts=s["type_counts"],
        scored_counts=s["scored_counts"],
        extra=s["extra"],
        intervals=_from_bounds(s["intervals"]),
        by_type_intervals={t: _from_bounds(b) for t, b in s["by_type_intervals"].items()},
        by_type_min_intervals=_from_bounds(s["by_type_min_intervals"]),
        bootstrap=Bootstrap(*s["bootstrap"]),
        top_k=s["top_k"],
        ran_out_at_depth=s["ran_out_at_depth"],
    )
    return results, summary


def _bounds(bounds: Mapping[str, Bounds]) -> dict[str, list[float]]:
    return {name: [b.low, b.high] for name, b in bounds.items()}


def _from_bounds(value: Mapping[str, Sequence[float]]) -> dict[str, Bounds]:
    return {name: Bounds(low, high) for name, (low, high) in value.items()}
