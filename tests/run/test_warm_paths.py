"""What a warm run skips (bench/README.md, "The cost curve") gives what reading everything
gives: the corpus fingerprint, the chunk table, cached rankings without the index."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import pickle
import random
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from ragsweep.cache.entries import META, seal_entry
from ragsweep.cache.stage import StageCache
from ragsweep.chunk.chunkers import Chunk, chunk_corpus
from ragsweep.chunk.table import BOUNDS_FILE, ChunkTable, take_rows
from ragsweep.chunk.views import ChunkColumns, ChunkRows, KnownRows
from ragsweep.config.app import plain_config
from ragsweep.config.schema import ChunkingConfig, CorpusConfig
from ragsweep.core.errors import CorpusError
from ragsweep.core.names import CHUNKS_FILE
from ragsweep.data.corpus import Corpus, Document, load_corpus
from ragsweep.data.corpus_cache import (
    ID_TABLE_FILE,
    IDS_FILE,
    JSON_IDS_FILE,
    JsonlDocuments,
    open_corpus,
    read_ids,
    write_ids,
)
from ragsweep.index.base import scope_masker, scope_masker_from_codes
from ragsweep.index.stages import (
    KNOWN_IDS_FILE,
    KNOWN_SPANS_FILE,
    PACKED_ROWS_FILE,
    PACKED_TEXTS_FILE,
    RETRIEVED_FILE,
)
from ragsweep.run.config import resolve
from ragsweep.run.files import _JSON_LINE as JSON_LINE
from ragsweep.run.files import (
    LINES_STAGE,
    RunCases,
    StoredLines,
    chunk_line,
    chunk_row,
    write_artifacts,
    write_lines,
)
from ragsweep.run.pipeline import RunResult, StageOutcome, run_evaluation, run_facts, run_stages
from tests.conftest import ComposeFn

REPO = Path(__file__).resolve().parents[2]


def scale_corpus() -> ModuleType:
    """bench/scale_corpus.py, the cost curve's corpus generator."""
    name = "bench_scale_corpus"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / "scale_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def write_docs(
    path: Path, docs: list[dict[str, Any] | None], newline: str = "\n", bom: bool = False
) -> None:
    """``docs`` as JSONL lines; None is a blank line."""
    lines = ["   " if d is None else json.dumps(d, ensure_ascii=False) for d in docs]
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + newline.join(lines).encode("utf-8"))


DOCS = [
    {"id": "b", "text": "Zweite Zeile\u2028mit Trenner und Ümlauten.", "title": "B"},
    {"id": "a", "text": "first document\nwith two lines", "metadata": {"k": 1}},
    {"id": "c", "text": "日本語のテキスト、三番目。"},
]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("bom", [False, True])
def test_an_unchanged_jsonl_corpus_is_read_lazily_and_equals_reading_it(
    tmp_path: Path, newline: str, bom: bool
) -> None:
    path = tmp_path / "corpus.jsonl"
    write_docs(path, [DOCS[0], None, DOCS[1], None, DOCS[2], None], newline, bom)
    cfg = CorpusConfig(path=str(path))
    eager = load_corpus(cfg)
    cache = StageCache(tmp_path / "cache")
    first = open_corpus(cfg, cache, trust_mtime=True)  # reads the file whole, stores its index
    assert cache.stats.stage("corpus").misses == 1
    again = open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    assert isinstance(again.documents, JsonlDocuments)
    assert again.content_hash() == first.content_hash() == eager.content_hash()
    assert tuple(again.ids) == eager.ids == ("a", "b", "c")
    for doc in eager:
        assert again.get(doc.id) == doc
        assert doc.id in again
    assert "d" not in again
    lazy = open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    assert list(lazy) == list(eager.documents)  # iterating reads the file whole
    copied = pickle.loads(pickle.dumps(again))  # after reads: the open file is not sent
    assert copied.get("c") == eager.get("c") and copied.content_hash() == eager.content_hash()


def test_document_ids_are_stored_one_a_line_or_as_json_and_both_read_back(
    tmp_path: Path,
) -> None:
    plain = ["a", "b c", "日本", "x\u2028y", "z\ud800", "\r"]  # not in order: no id table
    write_ids(tmp_path, plain)
    assert (tmp_path / IDS_FILE).is_file() and list(read_ids(tmp_path)) == plain
    (tmp_path / IDS_FILE).unlink()
    with_line_feed = ["b\nc", "a"]
    write_ids(tmp_path, with_line_feed)
    assert (tmp_path / JSON_IDS_FILE).is_file() and not (tmp_path / IDS_FILE).exists()
    assert list(read_ids(tmp_path)) == with_line_feed


def test_a_corpus_entry_with_ids_as_json_is_still_read(tmp_path: Path) -> None:
    """Corpus entries written before the ids were one a line hold ``ids.json``."""
    path = tmp_path / "corpus.jsonl"
    write_docs(path, DOCS)
    cfg = CorpusConfig(path=str(path))
    open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    (entry,) = [m.parent for m in (tmp_path / "cache" / "corpus").glob("*/*/meta.json")]
    ids = list(read_ids(entry))
    (entry / ID_TABLE_FILE).unlink()
    (entry / JSON_IDS_FILE).write_text(json.dumps(ids), encoding="utf-8")
    meta = json.loads((entry / META).read_text(encoding="utf-8"))
    (entry / META).unlink()
    seal_entry(entry, "corpus", meta["compute_seconds"], {"key": meta["key"]})
    cache = StageCache(tmp_path / "cache")
    again = open_corpus(cfg, cache, trust_mtime=True)
    assert cache.stats.stage("corpus").hits == 1
    assert tuple(again.ids) == load_corpus(cfg).ids and again.get("c") == load_corpus(cfg).get("c")


def test_a_rewritten_corpus_is_read_again_even_with_the_same_size_and_mtime(
    tmp_path: Path,
) -> None:
    path = tmp_path / "corpus.jsonl"
    write_docs(path, DOCS)
    cfg = CorpusConfig(path=str(path))
    cache = StageCache(tmp_path / "cache")
    before = open_corpus(cfg, cache, trust_mtime=True).content_hash()
    stat = path.stat()
    edited = [dict(DOCS[0], text=DOCS[0]["text"].replace("Zweite", "Dritte")), *DOCS[1:]]
    write_docs(path, edited)  # the same size, another text
    assert path.stat().st_size == stat.st_size
    after = open_corpus(cfg, cache, trust_mtime=True)
    assert after.content_hash() != before  # the new mtime (and ctime) is another fingerprint
    assert after.get("b").text.startswith("Dritte")
    assert cache.stats.stage("corpus").misses == 2
    # mtime set back to the first version's: ctime still moved, so it is still detected
    edited[0]["text"] = edited[0]["text"].replace("Dritte", "Vierte")
    write_docs(path, edited)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_mtime_ns == stat.st_mtime_ns
    third = open_corpus(cfg, cache, trust_mtime=True)
    assert third.get("b").text.startswith("Vierte") and cache.stats.stage("corpus").misses == 3


def test_trust_mtime_false_and_a_disabled_cache_read_the_corpus_whole(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    write_docs(path, DOCS)
    cfg = CorpusConfig(path=str(path))
    cache = StageCache(tmp_path / "cache")
    open_corpus(cfg, cache, trust_mtime=True)
    for corpus in (
        open_corpus(cfg, cache, trust_mtime=False),
        open_corpus(cfg, StageCache(None), trust_mtime=True),
    ):
        assert isinstance(corpus.documents, tuple)
        assert corpus.content_hash() == load_corpus(cfg).content_hash()
    assert cache.stats.stage("corpus").hits == 0


def test_a_corpus_changed_under_a_lazy_reader_is_an_error_not_wrong_text(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    write_docs(path, DOCS)
    cfg = CorpusConfig(path=str(path))
    open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    lazy = open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    swapped = [dict(DOCS[0], id="x"), *DOCS[1:]]  # same byte spans, another id on line 1
    write_docs(path, swapped)
    with pytest.raises(CorpusError, match="changed while this run read it"):
        lazy.get("b")


@pytest.mark.parametrize("mode", ["fixed", "heading", "paragraph"])
def test_the_chunk_table_equals_the_chunk_list(tmp_path: Path, mode: str) -> None:
    corpus = load_corpus(CorpusConfig(path=str(REPO / "demo" / "corpus")))
    cfg = ChunkingConfig(mode=mode, size=300, overlap=50 if mode == "fixed" else 0)
    chunks = chunk_corpus(corpus, cfg)
    assert any(c.heading_path for c in chunks)
    table = ChunkTable.from_chunks(corpus, chunks)
    table.save(tmp_path)
    loaded = ChunkTable.load(tmp_path, corpus)
    assert isinstance(loaded.spans, np.memmap)  # memory-mapped, not read into memory
    assert len(loaded) == len(chunks)
    assert list(loaded) == chunks
    assert [loaded[i] for i in range(len(chunks))] == chunks
    assert loaded[-1] == chunks[-1] and loaded[2:5] == chunks[2:5]
    with pytest.raises(IndexError):
        loaded[len(chunks)]
    docs = [c.doc for c in chunks]
    assert [corpus.ids[code] for code in loaded.doc_codes()] == docs
    by_name, by_code = (
        scope_masker(docs),
        scope_masker_from_codes(loaded.doc_codes(), loaded.doc_positions()),
    )
    rng = random.Random(1)
    for _ in range(30):
        scope = rng.sample(corpus.ids, rng.randint(0, 3)) + (
            ["missing.md"] if rng.random() < 0.3 else []
        )
        assert np.array_equal(by_code(scope), by_name(scope)), scope


@pytest.mark.parametrize("bom", [False, True])
def test_taking_rows_of_a_lazy_corpus_equals_indexing_the_chunk_list(
    tmp_path: Path, bom: bool
) -> None:
    path = tmp_path / "corpus.jsonl"
    docs = [
        {"id": f"d{i:02d}", "text": f"Dokument {i}: " + "wörter " * (i % 7 + 30)} for i in range(24)
    ]
    write_docs(path, [*docs[12:], None, *DOCS, *docs[:12]], bom=bom)  # file order != id order
    cfg = CorpusConfig(path=str(path))
    eager = load_corpus(cfg)
    open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    lazy = open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    assert isinstance(lazy.documents, JsonlDocuments)
    chunks = chunk_corpus(eager, ChunkingConfig(mode="fixed", size=60, overlap=10))
    table = ChunkTable.from_chunks(lazy, chunks)
    table.save(tmp_path)
    loaded = ChunkTable.load(tmp_path, lazy)
    rng = random.Random(3)
    rows = [rng.randrange(len(chunks)) for _ in range(40)]  # unsorted, with repeats
    assert loaded.take(rows) == [chunks[row] for row in rows]
    assert loaded.take([]) == []
    assert take_rows(chunks, rows[:5]) == [chunks[row] for row in rows[:5]]
    assert [loaded[row] for row in range(len(chunks))] == chunks  # the rest, one by one
    assert loaded.take(rows[::-1]) == [chunks[row] for row in rows[::-1]]  # all built now
    for bad in ([len(chunks)], [-1], [0, -1]):
        with pytest.raises(IndexError):
            loaded.take(bad)


def test_a_table_is_checked_against_its_corpus_by_the_bounds_stored_with_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "corpus.jsonl"
    write_docs(path, DOCS)
    corpus = load_corpus(CorpusConfig(path=str(path)))
    chunks = chunk_corpus(corpus, ChunkingConfig(mode="fixed", size=8, overlap=0))
    ChunkTable.from_chunks(corpus, chunks).save(tmp_path)
    stored = json.loads((tmp_path / BOUNDS_FILE).read_text(encoding="utf-8"))
    assert stored == {"low": 0, "doc": len(corpus) - 1, "heading": 0}
    assert list(ChunkTable.load(tmp_path, corpus)) == chunks
    for damaged in (
        {**stored, "doc": len(corpus)},
        {**stored, "heading": 5},
        {**stored, "low": -1},
        {**stored, "doc": -1},
        {"low": 0},
        {**stored, "doc": "0"},
        {**stored, "heading": True},
        [0, 1, 2],
    ):
        (tmp_path / BOUNDS_FILE).write_text(json.dumps(damaged), encoding="utf-8")
        with pytest.raises(ValueError):
            ChunkTable.load(tmp_path, corpus)
    (tmp_path / BOUNDS_FILE).unlink()  # an entry written before the file: the spans decide
    assert list(ChunkTable.load(tmp_path, corpus)) == chunks
    smaller = load_corpus(CorpusConfig(path=str(path))).documents[:1]
    with pytest.raises(ValueError, match="outside the corpus"):
        ChunkTable.load(tmp_path, Corpus(documents=smaller, source=str(path)))


def test_given_texts_must_be_strings_as_long_as_their_spans(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    write_docs(path, DOCS)
    corpus = load_corpus(CorpusConfig(path=str(path)))
    chunks = chunk_corpus(corpus, ChunkingConfig(mode="fixed", size=8, overlap=0))
    assert len(chunks) > 3
    rows = [0, 2, 3]
    texts = [chunks[row].text for row in rows]
    for bad_texts, bad_row in (
        ([texts[0], texts[1] + "x", texts[2]], 2),
        ([texts[0], texts[1], 7], 3),
        ([None, texts[1], texts[2]], 0),
    ):
        table = ChunkTable.from_chunks(corpus, chunks)
        with pytest.raises(ValueError, match=f"chunk row {bad_row} is not its span"):
            table.add_texts(rows, bad_texts)
        assert table._built == {} and table._texts == {}  # nothing half given
    table = ChunkTable.from_chunks(corpus, chunks)
    table.add_texts(rows, texts)
    assert table.take(rows) == [chunks[row] for row in rows]
    table = ChunkTable.from_chunks(corpus, chunks)
    table.add_texts(rows, np.array(texts))  # str subclasses (numpy's) are texts too
    assert [c.text for c in table.take(rows)] == texts


def test_a_chunk_line_is_its_row_encoded() -> None:
    texts = ["plain", 'quo"te \\ back\\slash', "ctrl\x00\x1f\t\n\r", "\u2028\u2029 ünï 日本 🙂", ""]
    for i, text in enumerate(texts):
        chunk = Chunk(
            id=f'doc "{i}"@0-{len(text)}',
            doc=f'doc "{i}"',
            start=0,
            end=len(text),
            text=text,
            heading_path=("Über", 'a "b"', "\\x") if i % 2 else (),
        )
        line = chunk_line(chunk)
        assert line == JSON_LINE.encode(chunk_row(chunk)) + "\n"
        assert json.loads(line) == chunk_row(chunk)


def test_masks_of_unordered_codes_equal_masks_by_name() -> None:
    rng = random.Random(4)
    docs = [f"d{i}" for i in range(30)]
    chunk_docs = [rng.choice(docs) for _ in range(500)]  # not in corpus order
    positions = {d: i for i, d in enumerate(docs)}
    codes = np.array([positions[d] for d in chunk_docs], dtype=np.int64)
    by_code, by_name = scope_masker_from_codes(codes, positions), scope_masker(chunk_docs)
    for _ in range(40):
        scope = rng.sample(docs, rng.randint(0, 5))
        assert np.array_equal(by_code(scope), by_name(scope))


def test_a_chunk_entry_of_the_json_layout_is_recomputed(tmp_path: Path) -> None:
    corpus = load_corpus(CorpusConfig(path=str(REPO / "demo" / "corpus")))
    (tmp_path / "data.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ValueError, match="layout before the table"):
        ChunkTable.load(tmp_path, corpus)


# --- whole runs: cold, warm and without the cache give the same per-case files ----------


def run_files(result: RunResult) -> dict[str, str]:
    return {
        name: (result.output_dir / name).read_text(encoding="utf-8")
        for name in ("cases.jsonl", "chunks.jsonl", "cases_table.json")
    }


def without_latency(cases_jsonl: str) -> list[dict[str, Any]]:
    """The rows of ``cases.jsonl`` without search times (a fresh search measures anew)."""
    rows = [json.loads(line) for line in cases_jsonl.splitlines()]
    for row in rows:
        assert "latency_ms" in row
        del row["latency_ms"]
    return rows


def three_runs(compose_config: ComposeFn, tmp_path: Path, *overrides: str) -> list[RunResult]:
    """A cold run, a warm run (every stage cached) and a run with the cache off."""
    cache = f"cache.dir={tmp_path / 'stage-cache'}"
    out = []
    for name, extra in (("cold", cache), ("warm", cache), ("off", "cache.enabled=false")):
        resolved = resolve(plain_config(compose_config(*overrides, extra)))
        out.append(run_evaluation(resolved, tmp_path / name))
    return out


def assert_same_cases(cold: RunResult, warm: RunResult, off: RunResult) -> None:
    assert run_files(warm) == run_files(cold)  # byte for byte: rankings and times cached
    assert without_latency(run_files(off)["cases.jsonl"]) == without_latency(
        run_files(cold)["cases.jsonl"]
    )
    assert run_files(off)["chunks.jsonl"] == run_files(cold)["chunks.jsonl"]
    assert warm.summary.overall == cold.summary.overall
    assert warm.cache_metrics["cache/rankings/hits"] == 1
    assert "cache/texts/hits" not in warm.cache_metrics  # the index was never opened


def test_cold_warm_and_uncached_runs_write_the_same_cases_on_the_demo(
    compose_config: ComposeFn, tmp_path: Path
) -> None:
    cold, warm, off = three_runs(compose_config, tmp_path, "chunking=heading")
    assert_same_cases(cold, warm, off)


def synthetic_overrides(tmp_path: Path, n_docs: int = 300, n_cases: int = 80) -> list[str]:
    """A cost-curve corpus (JSONL: read lazily on a warm run) and golden set under
    ``tmp_path``, as overrides."""
    generator = scale_corpus()
    spec = generator.CorpusSpec(n_docs=n_docs, n_cases=n_cases, golden_docs=n_docs * 5 // 6)
    corpus, golden = tmp_path / "corpus.jsonl", tmp_path / "golden.jsonl"
    generator.write_corpus(spec, corpus)
    generator.write_golden(spec, golden)
    return [
        "corpus=squad",
        f"corpus.path={corpus}",
        f"golden.path={golden}",
        "chunking=fixed",
        "chunking.size=200",
        "chunking.overlap=0",
    ]


def test_cold_warm_and_uncached_runs_write_the_same_cases_on_a_synthetic_corpus(
    compose_config: ComposeFn, tmp_path: Path
) -> None:
    overrides = synthetic_overrides(tmp_path)
    cold, warm, off = three_runs(compose_config, tmp_path, *overrides)
    assert warm.cache_metrics["cache/corpus/hits"] == 1  # the corpus was not read again
    assert_same_cases(cold, warm, off)
    assert len(run_files(warm)["cases.jsonl"].splitlines()) == 80


# --- the retrieved chunks' texts stored with the rankings ---------------------------------


def documents_read(outcome: StageOutcome) -> set[str]:
    """The ids of the documents a run's lazy corpus parsed."""
    documents = outcome.corpus.documents
    assert isinstance(documents, JsonlDocuments)
    return {documents.ids[i] for i in documents._read}


def evidence_documents(outcome: StageOutcome) -> set[str]:
    return {span.doc for case in outcome.golden.cases for span in case.evidence}


def test_a_rankings_hit_reads_no_document_for_the_retrieved_chunks(
    compose_config: ComposeFn, tmp_path: Path
) -> None:
    config = [*synthetic_overrides(tmp_path), f"cache.dir={tmp_path / 'stage-cache'}"]
    resolved = resolve(plain_config(compose_config(*config)))
    cold = run_stages(resolved)
    retrieved = {chunk.doc for chunk in cold.retrieved}
    assert retrieved - evidence_documents(cold)  # some retrieved documents hold no evidence
    warm = run_stages(resolve(plain_config(compose_config(*config))))
    assert warm.cache.stats.stage("rankings").hits == 1
    assert list(warm.retrieved) == list(cold.retrieved)  # ids, spans, heading paths, texts
    assert warm.results == cold.results
    assert documents_read(warm) <= evidence_documents(warm)  # the golden set's, no more
    assert not documents_read(warm) & (retrieved - evidence_documents(warm))


def rankings_entry(cache_dir: Path) -> Path:
    (entry,) = [p.parent for p in (cache_dir / "rankings").glob("*/*/meta.json")]
    return entry


def reseal(entry: Path, stage: str = "rankings") -> None:
    """Record the entry's files as they are now in its meta.json (its key kept), as if the
    stage had written them."""
    meta = json.loads((entry / META).read_text(encoding="utf-8"))
    (entry / META).unlink()
    seal_entry(entry, stage, meta["compute_seconds"], {"key": meta["key"]})


def edit_packed(entry: Path, edit: Callable[[str], str]) -> None:
    path = entry / PACKED_TEXTS_FILE
    path.write_bytes(edit(path.read_bytes().decode("utf-8", "surrogatepass")).encode("utf-8"))


def drop_a_row(entry: Path) -> None:
    rows = np.load(entry / PACKED_ROWS_FILE)
    np.save(entry / PACKED_ROWS_FILE, rows[1:])


def shift_known_spans(entry: Path) -> None:
    spans = np.load(entry / KNOWN_SPANS_FILE)
    spans[:, 1:3] += 1
    np.save(entry / KNOWN_SPANS_FILE, spans)


def edit_known_ids(entry: Path, value: Any) -> None:
    (entry / KNOWN_IDS_FILE).write_text(json.dumps(value), encoding="ascii")


def rename_known_ids(entry: Path) -> None:
    stored = json.loads((entry / KNOWN_IDS_FILE).read_text(encoding="ascii"))
    edit_known_ids(entry, {"ids": [i + "x" for i in stored["ids"]], "docs": stored["docs"]})


def reword(text: str) -> str:
    return ("x" if text[0] != "x" else "y") + text[1:]


def test_stored_texts_that_are_damaged_or_missing_are_never_served(
    compose_config: ComposeFn, tmp_path: Path
) -> None:
    """Every damage to the texts stored with cached rankings gives the cold run's files:
    an entry written before the texts were stored is served and reads the documents, one
    that stored them as JSON is served from that; a missing or changed file (checksum),
    or a resealed one whose rows or text lengths do not fit the rankings, is discarded and
    searched again."""
    cache_dir = tmp_path / "stage-cache"
    config = [*synthetic_overrides(tmp_path, 120, 40), f"cache.dir={cache_dir}"]

    def run(name: str) -> RunResult:
        return run_evaluation(resolve(plain_config(compose_config(*config))), tmp_path / name)

    def served_as_it_is(name: str) -> None:
        old = run(name)
        assert run_files(old) == run_files(cold), name
        assert old.cache_metrics["cache/rankings/hits"] == 1, name
        assert old.cache_metrics["cache/rankings/corrupt"] == 0, name
        assert not (entry / PACKED_TEXTS_FILE).exists(), name  # not rebuilt

    cold = run("cold")
    entry = rankings_entry(cache_dir)
    for name in (PACKED_TEXTS_FILE, PACKED_ROWS_FILE, KNOWN_SPANS_FILE, KNOWN_IDS_FILE):
        assert (entry / name).is_file(), name
    assert not (entry / RETRIEVED_FILE).exists()
    shutil.rmtree(cache_dir / LINES_STAGE)  # the files then use the texts

    (entry / KNOWN_SPANS_FILE).unlink()  # texts without their rows' spans and ids
    (entry / KNOWN_IDS_FILE).unlink()
    reseal(entry)
    packed_only = run("packed-only")
    assert run_files(packed_only) == run_files(cold)
    assert packed_only.cache_metrics["cache/rankings/hits"] == 1
    shutil.rmtree(cache_dir / LINES_STAGE)

    rows = np.load(entry / PACKED_ROWS_FILE).tolist()
    packed = (entry / PACKED_TEXTS_FILE).read_bytes().decode("utf-8", "surrogatepass")
    spans = np.load(next((cache_dir / "chunks").glob("*/*/spans.npy")))[rows]
    offsets = [0, *np.cumsum(spans[:, 2] - spans[:, 1]).tolist()]
    texts = [packed[a:b] for a, b in itertools.pairwise(offsets)]
    (entry / RETRIEVED_FILE).write_text(json.dumps({"rows": rows, "texts": texts}), "ascii")
    (entry / PACKED_TEXTS_FILE).unlink()
    (entry / PACKED_ROWS_FILE).unlink()
    reseal(entry)
    served_as_it_is("json-entry")
    (entry / RETRIEVED_FILE).unlink()  # an entry stored before the texts were
    reseal(entry)
    served_as_it_is("old-entry")
    shutil.rmtree(entry)
    run("rebuilt")  # a miss: stores the texts again

    damages: list[tuple[str, Callable[[Path], None]]] = [
        ("missing", lambda e: (e / PACKED_TEXTS_FILE).unlink()),
        ("rows missing", lambda e: ((e / PACKED_ROWS_FILE).unlink(), reseal(e))),
        ("edited", lambda e: edit_packed(e, reword)),
        ("other rows", lambda e: (drop_a_row(e), reseal(e))),
        ("longer text", lambda e: (edit_packed(e, lambda t: t + " "), reseal(e))),
        ("other spans", lambda e: (shift_known_spans(e), reseal(e))),
        ("other ids", lambda e: (rename_known_ids(e), reseal(e))),
        ("ids not lists", lambda e: (edit_known_ids(e, {"ids": 1, "docs": 2}), reseal(e))),
    ]
    for name, damage in damages:
        shutil.rmtree(cache_dir / LINES_STAGE, ignore_errors=True)
        entry = rankings_entry(cache_dir)
        damage(entry)
        again = run(name)
        assert again.cache_metrics["cache/rankings/corrupt"] == 1, name
        assert again.cache_metrics["cache/rankings/hits"] == 0, name
        assert without_latency(run_files(again)["cases.jsonl"]) == without_latency(
            run_files(cold)["cases.jsonl"]
        ), name
        assert run_files(again)["chunks.jsonl"] == run_files(cold)["chunks.jsonl"], name
        assert (rankings_entry(cache_dir) / PACKED_TEXTS_FILE).is_file()


# --- the retrieved chunks' lines cached for the files -------------------------------------


def lines_entries(cache_dir: Path) -> list[Path]:
    return [p.parent for p in (cache_dir / LINES_STAGE).glob("*/*/meta.json")]


def test_a_warm_run_copies_its_chunks_file_from_the_cache_and_never_a_damaged_one(
    compose_config: ComposeFn, tmp_path: Path
) -> None:
    """The first run stores its ``chunks.jsonl`` in the stage cache; a warm run copies it
    (shown by a resealed entry with other content, which it then writes); a damaged entry
    is discarded and written anew; a run of other chunks (another depth) gets its own."""
    cache_dir = tmp_path / "stage-cache"
    config = [*synthetic_overrides(tmp_path, 120, 40), f"cache.dir={cache_dir}"]

    def run(name: str, *extra: str) -> str:
        resolved = resolve(plain_config(compose_config(*config, *extra)))
        return run_files(run_evaluation(resolved, tmp_path / name))["chunks.jsonl"]

    cold = run("cold")
    (entry,) = lines_entries(cache_dir)
    assert (entry / CHUNKS_FILE).read_text(encoding="utf-8") == cold
    marked = cold.replace('"chunk_id"', '"chunk_ID"', 1)
    (entry / CHUNKS_FILE).write_text(marked, encoding="utf-8")
    reseal(entry, LINES_STAGE)
    assert run("resealed") == marked  # copied, not encoded again
    (entry / CHUNKS_FILE).write_text(cold + "\n", encoding="utf-8")  # not resealed
    assert run("damaged") == cold
    (entry,) = lines_entries(cache_dir)
    assert (entry / CHUNKS_FILE).read_text(encoding="utf-8") == cold
    shallower = run("shallower", "retrieval.top_k=5", "eval.ks=[1,5]", "eval.budgets=[]")
    assert len(lines_entries(cache_dir)) == 2
    assert len(shallower.splitlines()) < len(cold.splitlines())


def test_lone_surrogates_are_written_as_json_escapes(tmp_path: Path) -> None:
    """A lone surrogate (``\\ud800``; the corpus, golden and external-run readers refuse
    one, a model server's JSON reply could hold one): a JSON lines file holds it as its
    escape, stays UTF-8 and reads back the same text."""
    chunk = Chunk("d@0-4", "d", 0, 4, "a\ud800b\udfff", ("T\udc00",))
    path = tmp_path / "chunks.jsonl"
    write_lines(path, [chunk_line(chunk)])
    raw = path.read_bytes()
    assert b"a\\ud800b\\udfff" in raw and b"T\\udc00" in raw
    row = json.loads(raw.decode("utf-8"))  # strict UTF-8
    assert row["text"] == chunk.text and row["heading_path"] == ["T\udc00"]


def test_a_store_that_fails_while_the_files_are_written_leaves_them_whole(
    compose_config: ComposeFn, tmp_path: Path
) -> None:
    """The chunk lines' cache entry cannot be stored (its stage folder is a file): the run
    warns and writes ``chunks.jsonl`` itself, instead of losing its scored files."""
    cache_dir = tmp_path / "stage-cache"
    config = [*synthetic_overrides(tmp_path, 120, 40), f"cache.dir={cache_dir}"]
    off = run_evaluation(
        resolve(plain_config(compose_config(*config, "cache.enabled=false"))), tmp_path / "off"
    )
    cache_dir.mkdir()
    (cache_dir / LINES_STAGE).write_text("not a folder", encoding="utf-8")
    failing = run_evaluation(resolve(plain_config(compose_config(*config))), tmp_path / "run")
    assert run_files(failing)["chunks.jsonl"] == run_files(off)["chunks.jsonl"]


def test_a_warm_run_builds_only_the_top_chunk_of_each_case(
    compose_config: ComposeFn, tmp_path: Path
) -> None:
    """Scoring reads a chunk table's spans, and with the lines cached the files read only
    each case's top chunk: the other retrieved chunks are never built."""
    config = [*synthetic_overrides(tmp_path, 120, 40), f"cache.dir={tmp_path / 'stage-cache'}"]
    cold = run_evaluation(resolve(plain_config(compose_config(*config))), tmp_path / "cold")
    resolved = resolve(plain_config(compose_config(*config)))
    warm = run_stages(resolved)
    table = warm.built.chunks
    assert isinstance(table, ChunkTable) and isinstance(warm.retrieved, ChunkRows)
    assert not table._built  # scored from the spans
    assert table._known is not None  # the retrieved rows' spans and ids from the rankings
    assert np.array_equal(table._known.rows, warm.retrieved.rows)
    cases = RunCases(
        warm.cases,
        warm.results,
        warm.retrieved,
        warm.corpus,
        StoredLines(warm.cache, warm.built.chunk_set),
    )
    facts = run_facts(resolved, len(table))
    write_artifacts(tmp_path / "warm", {}, cases, warm.summary, resolved.cfg.eval, facts)
    tops = {r.retrieved[0].chunk_id for r in warm.results if r.retrieved}
    assert {chunk.id for chunk in table._built.values()} == tops
    assert len(warm.retrieved) > len(tops)
    for name in (CHUNKS_FILE, "cases_table.json"):
        assert (tmp_path / "warm" / name).read_bytes() == (cold.output_dir / name).read_bytes()


def test_chunk_columns_of_a_table_are_its_chunks_attributes(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    write_docs(path, DOCS)
    corpus = load_corpus(CorpusConfig(path=str(path)))
    chunks = chunk_corpus(corpus, ChunkingConfig(mode="fixed", size=8, overlap=0))
    table = ChunkTable.from_chunks(corpus, chunks)
    rows = [0, 2, len(chunks) - 1]
    columns = table.columns(rows)
    assert (columns.ids, columns.docs, columns.starts, columns.ends) == (
        [chunks[r].id for r in rows],
        [chunks[r].doc for r in rows],
        [chunks[r].start for r in rows],
        [chunks[r].end for r in rows],
    )
    assert columns.coded is not None
    assert columns.coded.doc.tolist() == [corpus.positions[chunks[r].doc] for r in rows]
    assert table.columns(np.array(rows)) is columns  # the same rows again: not rebuilt
    reused = np.array([1, 2])
    assert table.columns(reused).ids == [chunks[1].id, chunks[2].id]
    reused[:] = [0, 3]  # the caller refills its array: the memo is not fooled
    assert table.columns(reused).ids == [chunks[0].id, chunks[3].id]
    assert table.columns([1]).ids == [chunks[1].id]
    assert ChunkColumns.of([chunks[r] for r in rows]).ids == columns.ids
    picked = ChunkRows(table, np.array(rows))
    assert picked.ids == columns.ids and not table._built
    assert list(picked) == [chunks[r] for r in rows] and picked[-1] == chunks[rows[-1]]
    assert list(picked.subset([0, 2])) == [chunks[rows[0]], chunks[rows[2]]]
    with pytest.raises(IndexError):
        table.columns([len(chunks)])


def test_known_rows_give_what_the_table_gives_and_must_be_the_tables(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    write_docs(path, DOCS)
    corpus = load_corpus(CorpusConfig(path=str(path)))
    chunks = chunk_corpus(corpus, ChunkingConfig(mode="fixed", size=8, overlap=0))
    rows = np.array([0, 2, 3, len(chunks) - 1])
    plain = ChunkTable.from_chunks(corpus, chunks)

    def known(table: ChunkTable, **change: Any) -> KnownRows:
        fields = {
            "rows": rows,
            "spans": np.asarray(table.spans[rows]),
            "ids": [chunks[r].id for r in rows],
            "docs": [chunks[r].doc for r in rows],
        }
        return KnownRows(**{**fields, **change})

    table = ChunkTable.from_chunks(corpus, chunks)
    table.add_known_rows(known(table))
    last = len(chunks) - 1
    # all, some, not all known; as many rows as known but permuted, or repeated
    for picked in ([0, 2, 3, last], [2, 3], [1, 2], [3, 2, 0, last], [0, 0, 2, 3]):
        assert table.columns(picked).ids == plain.columns(picked).ids, picked
        assert table.columns(picked).docs == plain.columns(picked).docs, picked
        assert table.columns(picked).starts == plain.columns(picked).starts, picked
    assert [table[int(r)] for r in rows] == [chunks[r] for r in rows]
    shifted = np.asarray(plain.spans[rows]).copy()
    shifted[:, 1] += 1
    for bad, message in (
        ({"spans": shifted}, "spans are not the table's"),
        ({"ids": ["x", "y", "z", "w"]}, "is not the table's"),
        ({"docs": ["x", "y", "z", "w"]}, "is not the table's"),
        ({"rows": rows[::-1].copy()}, "ascending"),
        ({"ids": ["x"]}, "different lengths"),
    ):
        fresh = ChunkTable.from_chunks(corpus, chunks)
        with pytest.raises(ValueError, match=message):
            fresh.add_known_rows(known(fresh, **bad))
        assert fresh._known is None
    with pytest.raises(ValueError, match="must be strings"):
        fresh.add_known_rows(known(fresh, ids=[chunks[r].id for r in rows[:-1]] + [7]))
    packed = "".join(chunks[r].text for r in rows)
    for bad_packed, bad_known in (
        (packed + "x", known(fresh)),
        (packed, known(fresh, spans=shifted)),
    ):
        with pytest.raises(ValueError):  # the texts or the rows are wrong: nothing is given
            fresh.add_packed_texts(rows, bad_packed, bad_known)
        assert fresh._known is None and fresh._packed is None
    with pytest.raises(ValueError, match="not the known rows"):
        fresh.add_packed_texts(rows[:2], packed, known(fresh))
    fresh.add_packed_texts(rows, packed, known(fresh))
    assert fresh._known is not None and [fresh[int(r)] for r in rows] == [chunks[r] for r in rows]


def test_stored_texts_read_back_exactly(tmp_path: Path) -> None:
    """Texts with line separators, non-BMP characters and lone surrogates (the corpus
    reader refuses ``\\ud800``, so this corpus is built in memory) are stored and read
    back unchanged."""
    from ragsweep.index.stages import read_retrieved_texts, write_retrieved_texts

    texts = ["a\u2028b\r\nc", "\U0001f600 ü", "x\ud800y", "日本語"]
    corpus = Corpus([Document(f"d{i}", text) for i, text in enumerate(texts)], "memory")
    spans = np.array([[i, 0, len(t), 0] for i, t in enumerate(texts)], dtype=np.int64)
    table = ChunkTable(corpus, spans, [()])
    indices = np.array([[3, 1, -1], [0, 2, 1]])
    write_retrieved_texts(tmp_path, table, indices)
    fresh = ChunkTable(corpus, spans, [()])
    read_retrieved_texts(tmp_path, fresh, indices)
    assert fresh._packed is not None and fresh._packed.rows == [0, 1, 2, 3]
    assert not fresh._built  # each built when read
    assert [fresh[i] for i in range(4)] == [table[i] for i in range(4)]


def test_packed_texts_must_fill_their_spans_of_ascending_rows(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    write_docs(path, DOCS)
    corpus = load_corpus(CorpusConfig(path=str(path)))
    chunks = chunk_corpus(corpus, ChunkingConfig(mode="fixed", size=8, overlap=0))
    rows = [0, 2, 3]
    packed = "".join(chunks[row].text for row in rows)
    for bad_rows, bad_packed, message in (
        (rows, packed + "x", "hold"),
        (rows, packed[:-1], "hold"),
        ([2, 0, 3], packed, "ascending"),
        ([0, 2, 2], packed, "ascending"),
        ([0, 2, len(chunks)], packed, "outside"),
    ):
        table = ChunkTable.from_chunks(corpus, chunks)
        with pytest.raises(ValueError, match=message):
            table.add_packed_texts(bad_rows, bad_packed)
        assert table._packed is None
    table = ChunkTable.from_chunks(corpus, chunks)
    table.add_packed_texts(rows, packed)
    assert table.take([3, 0]) == [chunks[3], chunks[0]]
    assert table._packed is not None and 1 not in table._packed
    assert table[1] == chunks[1]  # not given: cut from its document


def test_scope_keys_follow_the_documents_of_the_corpus_in_a_scope() -> None:
    from ragsweep.config.schema import RetrievalConfig
    from ragsweep.index.backends import BACKENDS
    from ragsweep.index.base import Query
    from ragsweep.index.stages import rankings_key, scope_key

    positions = {"a": 0, "b": 1, "c": 2}
    assert scope_key(None, positions) is None
    assert scope_key(["b", "a", "b"], positions) == scope_key(["a", "b"], positions)
    assert scope_key(["a", "gone"], positions) == scope_key(["a"], positions)  # no chunks
    assert scope_key(["a"], positions) != scope_key(["b"], positions)
    assert scope_key([], positions) not in (None, scope_key(["a"], positions))
    queries = [Query("q", None, "1"), Query("r", None, "2")]
    bm25, cfg = BACKENDS.get("bm25"), RetrievalConfig()
    keys = {
        rankings_key("i", queries, cfg, 5, bm25, scopes)
        for scopes in ([None, None], ["docs:0", None], ["docs:1", None], [None, "docs:0"])
    }
    assert len(keys) == 4
