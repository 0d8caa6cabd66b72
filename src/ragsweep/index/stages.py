"""Cached stages of a run and their keys (see docs/caching.md).

Each stage's key hashes exactly the inputs that change its output, read from the stage
config's field metadata (:func:`ragsweep.config.schema.result_fields`), so a new result-affecting
field changes its stage's key unless it is declared not to:

- chunks: corpus content hash + the chunking fields of the chunks stage (mode, size,
  overlap) + chunker source digest;
- indexed texts: chunks key + the chunking fields of the texts stage (``heading_prefix``) +
  preprocessor identity (steps and the synonym file's content hash) + preprocessing code;
- embeddings and query embeddings: model identity + the exact text (content-addressed);
- index: indexed-texts key + model identity + the backend's index code digest + ragsweep
  version (each backend builds and loads its own index: :mod:`ragsweep.index.backends`);
- rankings: index key + every query's text and scope mask + retrieval fields and depth +
  the backend's search code digest (not ``retrieval.parent``/``parent_chars``: they map
  rankings of chunks to parents after the search, :mod:`ragsweep.index.small_to_big`).

Nothing about evaluation (``eval.*``, the golden set, tracking) is part of these keys;
scoring is never cached. The judge's per-case key is built by the judge stage from the
judge config's result fields (:mod:`ragsweep.judge.stage`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from ragsweep import __version__
from ragsweep.cache.entries import write_json
from ragsweep.cache.stage import StageCache
from ragsweep.chunk.chunkers import (
    CHUNKER_SOURCE_DIGEST,
    LIBRARY_MODES,
    NO_TOOLS,
    Chunk,
    ChunkTools,
    chunk_corpus,
    chunk_library_version,
    chunking_identity,
    indexed_text,
)
from ragsweep.chunk.table import ChunkTable, take_rows
from ragsweep.chunk.tokens import tokenizer_library_version
from ragsweep.chunk.views import KnownRows
from ragsweep.config.schema import OWN_STAGE, ChunkingConfig, RetrievalConfig, result_fields
from ragsweep.core.errors import DriftError
from ragsweep.core.gcpause import gc_paused
from ragsweep.core.hashing import sha256_json, source_digest
from ragsweep.data import preprocess as preprocess_module
from ragsweep.data.corpus import Corpus
from ragsweep.data.preprocess import Preprocessor
from ragsweep.index.base import Backend, Index, Query, Ranked
from ragsweep.index.encoding import ModelIdentity

TEXTS_STAGE = "texts"
QUERY_SIDE_FILE = "query_side.json"
"""Beside cached rankings: the preprocessing of the index they were searched on."""
PACKED_TEXTS_FILE = "retrieved_texts.txt"
"""Beside cached rankings: the text of every chunk the rankings hold, concatenated in row
order (UTF-8; a lone surrogate, should one reach it, kept as its three bytes), so
a hit builds those chunks from it without reading their documents (docs/caching.md, "What
a warm run reads"); at most queries × depth texts. Each text is as long as its span, so
the spans cut them apart: :meth:`ChunkTable.add_packed_texts`."""
PACKED_ROWS_FILE = "retrieved_rows.npy"
"""The rows of :data:`PACKED_TEXTS_FILE`'s texts: the rankings' distinct chunk rows,
ascending (int64)."""
KNOWN_SPANS_FILE = "retrieved_spans.npy"
"""The spans of :data:`PACKED_ROWS_FILE`'s rows (``(n, 4)`` int64, as the chunk table's):
a warm run reads them here, not from a table of 1M rows touched a page a row."""
KNOWN_IDS_FILE = "retrieved_ids.json"
"""``{"ids": [...], "docs": [...]}``: the chunk id and document id of each of
:data:`PACKED_ROWS_FILE`'s rows (JSON, non-ASCII escaped): not formatted anew each run."""
RETRIEVED_FILE = "retrieved_texts.json"
"""What rankings entries stored before :data:`PACKED_TEXTS_FILE` hold instead (still read):
``{"rows": [...], "texts": [...]}``, JSON with every non-ASCII character escaped."""


def document_titles(corpus: Corpus, cfg: ChunkingConfig) -> dict[str, str] | None:
    """Document id → title for ``chunking.title_prefix`` (None when it is off)."""
    if not cfg.title_prefix:
        return None
    return {d.id: d.title for d in corpus if d.title}


def chunks_key(corpus: Corpus, cfg: ChunkingConfig, tools: ChunkTools = NO_TOOLS) -> str:
    """Key of a chunk set: corpus content, the chunks-stage chunking fields, chunker code
    (and for a library mode, the library's version; for sizes in tokens, the sha256 of the
    tokenizer file and the version of the tokenizers library)."""
    library = {"library": chunk_library_version()} if cfg.mode in LIBRARY_MODES else {}
    tokens = {}
    if tools.tokenizer is not None:  # sizes in tokens: the file and the library counting them
        tokens = {"tokenizer": tools.tokenizer.sha256, "tokenizers": tokenizer_library_version()}
    if tools.embedder:  # semantic breakpoints: the sentence model
        tokens["sentence_model"] = tools.embedder
    return sha256_json(
        {
            "corpus": corpus.content_hash(),
            "chunking": chunking_identity(cfg, OWN_STAGE),
            "chunker_code": CHUNKER_SOURCE_DIGEST,
            **library,
            **tokens,
        }
    )


@cache
def preprocess_code_digest() -> str:
    """Code that shapes indexed texts is part of their key, as the chunker's is: editing
    the cleanup rules must not serve texts made by the old code."""
    return source_digest(preprocess_module)


def texts_key(chunks_key_: str, cfg: ChunkingConfig, preprocessor: Preprocessor) -> str:
    return sha256_json(
        {
            "chunks": chunks_key_,
            "chunking": result_fields(cfg, TEXTS_STAGE),
            "preprocess": preprocessor.identity,
            "preprocess_code": preprocess_code_digest(),
        }
    )


def index_key(texts_key_: str, model: ModelIdentity, backend: Backend) -> str:
    """Key of an index. The ragsweep version is part of it because it is part of the stored
    provenance: an upgrade rebuilds indexes (from cached vectors) instead of failing the
    provenance check."""
    return sha256_json(
        {
            "texts": texts_key_,
            "model": model,
            "ragsweep": __version__,
            "index_code": backend.index_code,
        }
    )


def rankings_key(
    index_key_: str,
    queries: Sequence[Query],
    cfg: RetrievalConfig,
    depth: int,
    backend: Backend,
    scopes: Sequence[str | None] | None = None,
) -> str:
    """Key of the rankings of ``queries``: the index, every query's text, scope and case id
    (in order), the retrieval fields, the depth actually searched and the search code.

    A query's scope is the digest of its chunk mask, or ``scopes[i]`` when given
    (:func:`scope_key`: its documents; the index key fixes which chunks they hold), so a
    run whose rankings are cached never builds a mask over every chunk.
    """
    digests: dict[int, str] = {}  # cases of one scope share one mask object

    def mask_digest(mask: np.ndarray) -> str:
        if id(mask) not in digests:
            digests[id(mask)] = hashlib.sha256(np.packbits(mask).tobytes()).hexdigest()
        return digests[id(mask)]

    if scopes is None:
        scopes = [None if q.allowed is None else mask_digest(q.allowed) for q in queries]
    listed = [[q.text, scope, q.case] for q, scope in zip(queries, scopes, strict=True)]
    return sha256_json(
        {
            "index": index_key_,
            "queries": sha256_json(listed),
            "retrieval": result_fields(cfg, OWN_STAGE),
            "depth": depth,
            "search_code": backend.search_code,
        }
    )


def scope_key(scope: Sequence[str] | None, positions: Mapping[str, int]) -> str | None:
    """A scope as part of a rankings key: the corpus positions of its documents (those in
    the corpus), sorted; None for no scope. Equal keys give equal masks over one chunk set."""
    if scope is None:
        return None
    codes = sorted({positions[doc] for doc in scope if doc in positions})
    return "docs:" + ",".join(map(str, codes))


def cached_chunks(
    corpus: Corpus, cfg: ChunkingConfig, key: str, cache: StageCache, tools: ChunkTools = NO_TOOLS
) -> ChunkTable:
    """The corpus's chunks under ``key`` (:func:`chunks_key`) as a :class:`ChunkTable`:
    spans are cached (memory-mapped on a hit), texts are sliced from the source for the
    chunks that are read."""
    built: list[ChunkTable] = []

    def build(folder: Path) -> None:
        built.append(ChunkTable.from_chunks(corpus, chunk_corpus(corpus, cfg, tools)))
        built[0].save(folder)

    def load(folder: Path) -> ChunkTable:
        return built[0] if built else ChunkTable.load(folder, corpus)

    return cache.get_or_build("chunks", key, build, load)


def cached_texts(
    chunks: Sequence[Chunk],
    key: str,
    heading_prefix: bool,
    preprocessor: Preprocessor,
    cache: StageCache,
    titles: Mapping[str, str] | None = None,
) -> list[str]:
    """The preprocessed text that is indexed for each chunk; ``titles`` (document id →
    title, ``chunking.title_prefix``) head the chunks of titled documents."""
    titled = titles or {}

    def compute() -> list[str]:
        return [preprocessor(indexed_text(c, heading_prefix, titled.get(c.doc))) for c in chunks]

    return cache.json_value("texts", key, compute, list, list)


def cached_rankings(
    index: Callable[[], Index],
    key: str,
    queries: Sequence[Query],
    query_preprocess: Mapping[str, Any],
    top_k: int,
    search: Callable[[Index], list[Ranked]],
    cache: StageCache,
    chunks: Sequence[Chunk] | None = None,
) -> list[Ranked]:
    """The rankings of ``queries`` on the index under ``key`` (:func:`rankings_key`);
    on a miss ``index()`` gives the index and ``search`` runs the queries on it.

    A hit returns the rankings and per-query search times recorded when they were
    computed, without opening the index (its key, part of the rankings key, names the model
    of both sides). On a miss the query side is checked against the index's provenance
    before the search; on a hit against the index preprocessing stored with the rankings,
    so drifted query preprocessing fails either way.

    With ``chunks`` (the indexed chunks the rankings point into), the texts of the chunks
    the rankings hold are stored with them (:data:`PACKED_TEXTS_FILE`,
    :data:`PACKED_ROWS_FILE`), and a hit gives them to a :class:`ChunkTable`
    (:meth:`ChunkTable.add_packed_texts`), so reading the retrieved chunks reads no
    document. An entry holding the older :data:`RETRIEVED_FILE` is served from it; one
    stored before either existed is still served: its chunks are then read from their
    documents.
    """

    def build(folder: Path) -> None:
        searched = index()
        searched.provenance.check_query_side(searched.query_model, query_preprocess)
        write_json(folder / QUERY_SIDE_FILE, {"preprocess": searched.provenance.preprocess})
        ranked = search(searched)
        indices = np.full((len(ranked), top_k), -1, dtype=np.int64)
        scores = np.zeros((len(ranked), top_k), dtype=np.float32)
        for row, r in enumerate(ranked):
            indices[row, : len(r.indices)] = r.indices
            scores[row, : len(r.scores)] = r.scores
        np.save(folder / "indices.npy", indices, allow_pickle=False)
        np.save(folder / "scores.npy", scores, allow_pickle=False)
        np.save(folder / "seconds.npy", np.array([r.seconds for r in ranked]), allow_pickle=False)
        if ranked and ranked[0].stages:
            write_json(folder / "stage_names.json", [name for name, _ in ranked[0].stages])
            split = np.array([[t for _, t in r.stages] for r in ranked], dtype=np.float64)
            np.save(folder / "stage_seconds.npy", split, allow_pickle=False)
        if chunks is not None:
            write_retrieved_texts(folder, chunks, indices)

    def load(folder: Path) -> list[Ranked]:
        _check_query_preprocess(folder, query_preprocess)
        indices = np.load(folder / "indices.npy", allow_pickle=False)
        scores = np.load(folder / "scores.npy", allow_pickle=False)
        seconds = np.load(folder / "seconds.npy", allow_pickle=False).tolist()
        if indices.shape != (len(queries), top_k) or len(seconds) != len(queries):
            raise DriftError(f"cached rankings {folder} do not match {len(queries)} queries")
        if isinstance(chunks, ChunkTable):
            read_retrieved_texts(folder, chunks, indices)
        lengths = (indices >= 0).sum(axis=1).tolist()
        split = _stage_seconds(folder, len(queries))
        return [
            Ranked(indices[row, :n], scores[row, :n], seconds[row], split[row])
            for row, n in enumerate(lengths)
        ]

    return cache.get_or_build("rankings", key, build, load)


def _held_rows(indices: np.ndarray) -> np.ndarray:
    """The distinct chunk rows of padded rankings (``-1``: no chunk), ascending."""
    return np.unique(indices[indices >= 0])


def write_retrieved_texts(folder: Path, chunks: Sequence[Chunk], indices: np.ndarray) -> None:
    """:data:`PACKED_TEXTS_FILE` and :data:`PACKED_ROWS_FILE` in ``folder``: the texts of
    the chunks at the rows ``indices`` hold; for a chunk table, also their spans and ids
    (:data:`KNOWN_SPANS_FILE`, :data:`KNOWN_IDS_FILE`)."""
    rows = _held_rows(indices)
    held = take_rows(chunks, rows.tolist())
    packed = "".join(chunk.text for chunk in held)
    (folder / PACKED_TEXTS_FILE).write_bytes(packed.encode("utf-8", "surrogatepass"))
    np.save(folder / PACKED_ROWS_FILE, rows.astype(np.int64), allow_pickle=False)
    if isinstance(chunks, ChunkTable):
        spans = np.asarray(chunks.spans[rows], dtype=np.int64).reshape(len(rows), 4)
        np.save(folder / KNOWN_SPANS_FILE, spans, allow_pickle=False)
        ids = {"ids": [c.id for c in held], "docs": [c.doc for c in held]}
        (folder / KNOWN_IDS_FILE).write_text(json.dumps(ids), encoding="ascii")


def read_retrieved_texts(folder: Path, chunks: ChunkTable, indices: np.ndarray) -> None:
    """Give ``chunks`` the stored texts of the rows ``indices`` hold, with their spans
    and ids when stored. No texts file (an entry written before they were stored):
    nothing is given, the chunks are read from their documents. Stored rows that are not
    those of the rankings, spans or ids that are not the table's, or texts that do not fit
    their spans, are a ValueError (a spans file without its ids file an OSError): the
    entry is malformed (discarded and searched again), and nothing of it is given."""
    packed = folder / PACKED_TEXTS_FILE
    if packed.is_file():
        rows = np.load(folder / PACKED_ROWS_FILE, allow_pickle=False)
        if not np.array_equal(rows, _held_rows(indices)):
            raise ValueError(f"{PACKED_ROWS_FILE} holds other chunk rows than the rankings")
        texts = packed.read_bytes().decode("utf-8", "surrogatepass")
        chunks.add_packed_texts(rows, texts, _known_rows(folder, rows))
    elif (folder / RETRIEVED_FILE).is_file():
        _read_json_texts(folder / RETRIEVED_FILE, chunks, indices)


def _known_rows(folder: Path, rows: np.ndarray) -> KnownRows | None:
    """The stored spans and ids of the held ``rows`` (:data:`KNOWN_SPANS_FILE`,
    :data:`KNOWN_IDS_FILE`); None for an entry without them (the table is read). The
    table checks them (:meth:`ChunkTable.add_packed_texts`)."""
    if not (folder / KNOWN_SPANS_FILE).is_file():
        return None
    spans = np.load(folder / KNOWN_SPANS_FILE, allow_pickle=False)
    ids = json.loads((folder / KNOWN_IDS_FILE).read_text(encoding="ascii"))
    if not isinstance(spans, np.ndarray) or spans.dtype != np.int64 or not isinstance(ids, dict):
        raise ValueError(f"{KNOWN_SPANS_FILE} or {KNOWN_IDS_FILE} is malformed")
    chunk_ids, docs = ids["ids"], ids["docs"]
    if not all(isinstance(value, list) for value in (chunk_ids, docs)):
        raise ValueError(f"{KNOWN_IDS_FILE} holds no ids")
    return KnownRows(rows.astype(np.int64), spans, chunk_ids, docs)


def _read_json_texts(path: Path, chunks: ChunkTable, indices: np.ndarray) -> None:
    """:func:`read_retrieved_texts` of an entry's :data:`RETRIEVED_FILE`."""
    with gc_paused():  # thousands of chunks, no cycles
        stored = json.loads(path.read_text(encoding="ascii"))
        rows, texts = stored["rows"], stored["texts"]
        if not isinstance(rows, list) or not isinstance(texts, list):
            raise ValueError(f"{path.name} holds no rows and texts")
        if rows != _held_rows(indices).tolist():
            raise ValueError(f"{path.name} holds other chunk rows than the rankings")
        chunks.add_texts(rows, texts)


def _check_query_preprocess(folder: Path, query_preprocess: Mapping[str, Any]) -> None:
    """DriftError when the rankings in ``folder`` came from an index built with other
    preprocessing than the queries went through (entries written before the file was
    stored have no record to compare: their key holds the index's anyway)."""
    path = folder / QUERY_SIDE_FILE
    if not path.is_file():
        return
    stored = json.loads(path.read_text(encoding="utf-8"))["preprocess"]
    if json.loads(json.dumps(dict(query_preprocess))) != stored:
        raise DriftError(
            f"preprocessing drift: index built with {stored}, "
            f"queries preprocessed with {dict(query_preprocess)}"
        )


def _stage_seconds(folder: Path, n_queries: int) -> list[tuple[tuple[str, float], ...]]:
    """The per-stage seconds of cached rankings (:attr:`Ranked.stages`), empty when the
    rankings were one search."""
    if not (folder / "stage_names.json").is_file():
        return [()] * n_queries
    names = json.loads((folder / "stage_names.json").read_text(encoding="utf-8"))
    split = np.load(folder / "stage_seconds.npy", allow_pickle=False)
    if split.shape != (n_queries, len(names)):
        raise DriftError(f"cached rankings {folder} hold stage times of another shape")
    return [tuple(zip(names, row, strict=True)) for row in split.tolist()]
