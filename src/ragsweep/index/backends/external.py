"""The ``external`` backend: score rankings produced by another system (a production vector
store, a search service) with the same span metrics, without re-implementing it.

``embedding=external embedding.options.rankings=run.jsonl`` (and optionally
``embedding.options.chunks=manifest.jsonl``). Formats (docs/retrieval.md):

- rankings, one line per golden case: ``{"id": "<case id>", "ranked": [...]}`` best first,
  each item a chunk id (a string, looked up in the manifest) or an object with ``doc``,
  ``start``, ``end`` (or ``chunk_id``) and optionally ``score``; an optional
  ``latency_ms`` is the other system's time for the query;
- manifest, one line per chunk: ``{"chunk_id": ..., "doc": ..., "start": ..., "end": ...}``.

The run's chunks are the other system's: the manifest's, then any span a ranking names that
the manifest does not, so ``chunking`` does not apply. Offsets are checked against the
corpus. Every case of the evaluated split must have a line; a missing score is ``1/rank``;
with ``retrieval.respect_scope`` chunks outside a case's scope are dropped.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ragsweep.cache.stage import StageCache
from ragsweep.chunk.chunkers import Chunk, make_chunk
from ragsweep.config.schema import EmbeddingConfig, not_hashed
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.core.hashing import sha256_file, sha256_json, source_digest
from ragsweep.core.lone_surrogates import lone_surrogate
from ragsweep.data.corpus import Corpus
from ragsweep.index import base as index_module
from ragsweep.index.base import BACKENDS, IndexProvenance, Query, Ranked
from ragsweep.index.encoding import ModelIdentity, options_for

Span = tuple[str, int, int]


@dataclass(frozen=True)
class ExternalOptions:
    """``rankings``: the rankings JSONL; ``chunks``: the chunk manifest JSONL (needed when
    rankings name chunks by id); ``name``: what reports call the system. The files count
    through their content (sha256), not their paths."""

    rankings: str = not_hashed("")
    chunks: str | None = not_hashed(None)
    name: str = not_hashed("external")

    def __post_init__(self) -> None:
        for key in ("rankings", "chunks"):
            path = getattr(self, key)
            if (key == "rankings" or path is not None) and not Path(path or "").is_file():
                raise ConfigError(f"embedding.options.{key}={path!r} is not a file")


def _jsonl(path: str) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ConfigError(f"{path}:{number}: not JSON: {exc}") from None
            if not isinstance(row, dict):
                raise ConfigError(f"{path}:{number}: expected an object")
            problem = lone_surrogate(line, row)
            if problem is not None:
                raise ConfigError(f"{path}:{number}: {problem}")
            rows.append((number, row))
    return rows


@dataclass(frozen=True)
class ExternalRun:
    """A parsed run: its chunk spans in order, chunk ids, and each case's ranking as
    ``(span positions, scores, latency seconds or 0)``."""

    spans: tuple[Span, ...]
    ids: tuple[str, ...]
    rankings: Mapping[str, tuple[tuple[int, ...], tuple[float, ...], float]]


def _span(item: Mapping[str, Any], where: str) -> Span:
    try:
        return (str(item["doc"]), int(item["start"]), int(item["end"]))
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"{where}: a chunk needs doc, start and end") from None


@functools.lru_cache(maxsize=4)
def parse_run(rankings: str, chunks: str | None, digest: str) -> ExternalRun:
    """Read both files (memoized by their content digest)."""
    del digest
    order: dict[Span, int] = {}
    ids: list[str] = []
    by_id: dict[str, int] = {}

    def add(span: Span, chunk_id: str | None) -> int:
        if span not in order:
            order[span] = len(ids)
            ids.append(chunk_id or f"{span[0]}@{span[1]}-{span[2]}")
        if chunk_id is not None:
            by_id.setdefault(chunk_id, order[span])
        return order[span]

    for number, row in _jsonl(chunks) if chunks else []:
        add(_span(row, f"{chunks}:{number}"), str(row.get("chunk_id", "")) or None)
    ranked: dict[str, tuple[tuple[int, ...], tuple[float, ...], float]] = {}
    for number, row in _jsonl(rankings):
        where = f"{rankings}:{number}"
        positions, scores = [], []
        for rank, item in enumerate(row.get("ranked", []), 1):
            positions.append(_position(item, where, by_id, add))
            score = item.get("score") if isinstance(item, Mapping) else None
            scores.append(float(score) if score is not None else 1.0 / rank)
        if "id" not in row:
            raise ConfigError(f"{where}: a ranking needs the case id")
        ranked[str(row["id"])] = (tuple(positions), tuple(scores), row.get("latency_ms", 0) / 1e3)
    return ExternalRun(tuple(order), tuple(ids), ranked)


def _position(item: Any, where: str, by_id: Mapping[str, int], add: Any) -> int:
    chunk_id = item if isinstance(item, str) else (item or {}).get("chunk_id")
    if chunk_id is not None and not (isinstance(item, Mapping) and "doc" in item):
        if chunk_id not in by_id:
            raise ConfigError(f"{where}: chunk id {chunk_id!r} is not in the chunk manifest")
        return by_id[chunk_id]
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: a ranked item is a chunk id or an object, got {item!r}")
    return int(add(_span(item, where), chunk_id))


def _files_digest(options: ExternalOptions) -> str:
    return sha256_json(
        {
            "rankings": sha256_file(options.rankings),
            "chunks": sha256_file(options.chunks) if options.chunks else None,
        }
    )


def external_identity(cfg: EmbeddingConfig) -> ModelIdentity:
    """The system's name and the content digest of its files (which are parsed here, so a
    malformed file fails before any work)."""
    options = options_for(ExternalOptions, cfg)
    _run(cfg)
    return ModelIdentity(
        backend="external",
        name=options.name,
        version="run",
        dimension=0,
        normalized=False,
        digest=_files_digest(options),
    )


def _run(cfg: EmbeddingConfig) -> ExternalRun:
    options = options_for(ExternalOptions, cfg)
    return parse_run(options.rankings, options.chunks, _files_digest(options))


@dataclass
class ExternalIndex:
    """The other system's rankings behind the :class:`~ragsweep.index.base.Index` protocol;
    ``Ranked.seconds`` is its ``latency_ms`` (0 when not given)."""

    provenance: IndexProvenance
    run: ExternalRun

    @property
    def query_model(self) -> ModelIdentity:
        return self.provenance.model

    def search(
        self, queries: Sequence[Query], top_k: int, query_preprocess: Mapping[str, Any]
    ) -> list[Ranked]:
        self.provenance.check_query_side(self.query_model, query_preprocess)
        missing = [q.case for q in queries if q.case not in self.run.rankings]
        if missing:
            raise BackendError(
                f"the external rankings have no line for {len(missing)} case(s), e.g. "
                f"{', '.join(map(str, missing[:5]))}"
            )
        return [self._ranked(q, top_k) for q in queries]

    def _ranked(self, query: Query, top_k: int) -> Ranked:
        positions, scores, seconds = self.run.rankings[str(query.case)]
        kept = [(p, s) for p, s in zip(positions, scores, strict=True)]
        if query.allowed is not None:
            kept = [(p, s) for p, s in kept if query.allowed[p]]
        kept = kept[:top_k]
        return Ranked(
            np.array([p for p, _ in kept], dtype=np.int64),
            np.array([s for _, s in kept], dtype=np.float32),
            seconds,
        )


class ExternalBackend:
    """The registered ``external`` backend; its chunks are the other system's."""

    index_stage = "external"
    index_code = ""

    @cached_property
    def search_code(self) -> str:
        return source_digest(sys.modules[__name__], index_module)

    def identity(self, cfg: EmbeddingConfig) -> ModelIdentity:
        return external_identity(cfg)

    def complete_chunks(self, cfg: EmbeddingConfig) -> bool:
        """With a manifest the run knows all the other system's chunks; without one only
        those its rankings name, so whether a chunk holds an evidence span is unknown."""
        return options_for(ExternalOptions, cfg).chunks is not None

    def own_chunks(self, cfg: EmbeddingConfig, corpus: Corpus) -> list[Chunk]:
        """The run's chunks, checked against the corpus (doc ids and offsets)."""
        chunks = []
        for doc_id, start, end in _run(cfg).spans:
            if doc_id not in corpus:
                raise ConfigError(f"external chunk {doc_id}@{start}-{end}: no document {doc_id!r}")
            doc = corpus.get(doc_id)
            if not 0 <= start < end <= len(doc.text):
                raise ConfigError(
                    f"external chunk {doc_id}@{start}-{end} lies outside {doc_id!r} "
                    f"(0..{len(doc.text)})"
                )
            chunks.append(make_chunk(doc, start, end, ()))
        ids = _run(cfg).ids
        return [
            Chunk(i, c.doc, c.start, c.end, c.text, c.heading_path)
            for i, c in zip(ids, chunks, strict=True)
        ]

    def cached_index(
        self,
        texts: Sequence[str],
        key: str,
        cfg: EmbeddingConfig,
        provenance: IndexProvenance,
        cache: StageCache,
    ) -> ExternalIndex:
        del texts, key, cache
        return ExternalIndex(provenance, _run(cfg))


BACKENDS.add("external", ExternalBackend())
