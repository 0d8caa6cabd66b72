"""The corpus entry's id table (src/ragsweep/data/corpus_cache.py, docs/caching.md "The corpus
fingerprint"): a warm corpus decodes only the ids it is asked for and gives what reading the
file whole gives, for every id a JSONL corpus may hold; entries in the earlier layouts are
still read and damaged ones rebuilt."""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import numpy as np
import pytest

from ragsweep.cache.entries import META, VERIFIED, seal_entry
from ragsweep.cache.stage import StageCache
from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.core.errors import GoldenError
from ragsweep.data.corpus import Corpus, load_corpus
from ragsweep.data.corpus_cache import (
    ID_TABLE_FILE,
    IDS_FILE,
    JSON_IDS_FILE,
    LINES_FILE,
    IdTable,
    JsonlDocuments,
    id_table,
    open_corpus,
    read_ids,
    write_ids,
)
from ragsweep.data.golden import load_golden

ID_FILES = (ID_TABLE_FILE, IDS_FILE, JSON_IDS_FILE)


def write_corpus(path: Path, ids: list[str]) -> CorpusConfig:
    """A JSONL corpus of one short document per id, in an order other than the ids' (JSON
    escapes, so lone surrogates can be written)."""
    lines = [
        json.dumps({"id": doc_id, "text": f"text {n} of {doc_id!r}"})
        for n, doc_id in enumerate(ids)
    ]
    path.write_text("\n".join(reversed(lines)) + "\n", encoding="ascii")
    return CorpusConfig(path=str(path))


def built_and_warm(tmp_path: Path, cfg: CorpusConfig) -> tuple[Corpus, StageCache]:
    """Store the corpus entry (a cold run), then open it again as a warm run does."""
    open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    cache = StageCache(tmp_path / "cache", trust_fingerprints=True)
    return open_corpus(cfg, cache, trust_mtime=True), cache


def the_entry(tmp_path: Path) -> Path:
    (entry,) = [m.parent for m in (tmp_path / "cache" / "corpus").glob("*/*/" + META)]
    return entry


def reseal(entry: Path) -> None:
    """Seal ``entry`` again after its files were replaced, so that only ``load`` can tell."""
    meta = json.loads((entry / META).read_text(encoding="utf-8"))
    (entry / META).unlink()
    (entry / VERIFIED).unlink(missing_ok=True)
    seal_entry(entry, "corpus", meta["compute_seconds"], {"key": meta["key"]})


def assert_same_corpus(lazy: Corpus, eager: Corpus) -> None:
    """Every id, position and document of ``lazy`` as of ``eager`` (the file read whole)."""
    assert isinstance(lazy.documents, JsonlDocuments)
    assert len(lazy) == len(eager) and len(lazy.ids) == len(eager.ids)
    assert [lazy.ids[i] for i in range(len(eager))] == list(eager.ids)
    assert lazy.ids[-1] == eager.ids[-1] and list(lazy.ids[1:3]) == list(eager.ids[1:3])
    assert list(lazy.ids[::-2]) == list(eager.ids[::-2])
    with pytest.raises(IndexError):
        lazy.ids[len(eager)]
    with pytest.raises(TypeError):
        lazy.ids["0"]
    for position, doc_id in enumerate(eager.ids):
        assert lazy.positions[doc_id] == position and doc_id in lazy and doc_id in lazy.ids
        assert lazy.get(doc_id) == eager.get(doc_id)
    assert lazy.positions[eager.ids[0]] == 0  # a second lookup (the kept one) agrees
    others = ("", "zz-not-an-id", eager.ids[0] + "\x00", eager.ids[-1] + "x", "a" * 9999)
    for missing in set(others) - set(eager.ids):
        assert missing not in lazy and missing not in lazy.ids
        with pytest.raises(KeyError):
            lazy.positions[missing]
    assert 7 not in lazy.positions
    assert len(lazy.positions) == len(eager) and list(lazy.positions) == list(eager.ids)
    assert lazy.content_hash() == eager.content_hash()
    copied = pickle.loads(pickle.dumps(lazy))  # a launcher sends a corpus to another process
    assert tuple(copied.ids) == eager.ids and copied.get(eager.ids[-1]) == eager.get(eager.ids[-1])
    assert list(lazy) == list(eager)  # iterating reads the file whole, checked against the ids
    assert tuple(lazy.ids) == eager.ids


PLAIN = [f"doc-{n:04d}" for n in range(40)]
ODD_IDS = {
    "plain": (PLAIN, ID_TABLE_FILE),
    "unicode": (["a", "Zürich", "日本", "x\u2028y", "\U0001f600", "\u00ff", "\x7f"], ID_TABLE_FILE),
    "line feed": (["a\nb", "a", "b\r\nc", "c"], ID_TABLE_FILE),
    "NUL": (["a", "a\x00", "a\x00b", "b"], IDS_FILE),
    "NUL and line feed": (["a\x00", "b\nc"], JSON_IDS_FILE),
    "one very long id": ([*PLAIN, "long-" + "x" * 100_000], IDS_FILE),
}


@pytest.mark.parametrize("name", sorted(ODD_IDS))
def test_a_warm_corpus_gives_what_reading_it_whole_gives_for_any_ids(
    tmp_path: Path, name: str
) -> None:
    ids, stored_as = ODD_IDS[name]
    cfg = write_corpus(tmp_path / "corpus.jsonl", ids)
    eager = load_corpus(cfg)
    lazy, cache = built_and_warm(tmp_path, cfg)
    assert cache.stats.stage("corpus").hits == 1
    assert [f for f in ID_FILES if (the_entry(tmp_path) / f).exists()] == [stored_as]
    assert isinstance(lazy.ids, IdTable) == (stored_as == ID_TABLE_FILE)
    assert_same_corpus(lazy, eager)


def test_the_id_table_keeps_the_order_of_sorted_str_ids_for_any_code_points() -> None:
    """UTF-8 (with lone surrogates kept) orders bytes as code points: a corpus's sorted ids
    are always increasing as bytes, and each is found by binary search on them."""
    rng = random.Random(17)
    points = [0x1, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xD800, 0xDBFF, 0xDC00, 0xDFFF, 0xE000]
    points += [0xFFFF, 0x10000, 0x10FFFF]
    for _ in range(30):
        ids = sorted(
            {
                "".join(chr(rng.choice([*points, rng.randrange(1, 0x110000)])) for _ in range(k))
                for k in rng.choices(range(1, 6), k=200)
            }
        )
        table = id_table([doc_id.encode("utf-8", "surrogatepass") for doc_id in ids])
        assert table is not None
        found = IdTable(table)
        assert list(found) == ids
        assert all(found.position(doc_id) == i for i, doc_id in enumerate(ids))
        positions = np.array(rng.choices(range(len(ids)), k=50))
        assert found.take(positions) == [found[p] for p in positions.tolist()]
        assert found.take(np.empty(0, dtype=np.int64)) == []


def test_ids_the_table_cannot_hold_are_written_as_before(tmp_path: Path) -> None:
    assert id_table([b"b", b"a"]) is None  # not increasing: no binary search
    assert id_table([b"a", b"a\x00"]) is None  # NUL is the padding
    short = [b"%02d" % n for n in range(20)]
    assert id_table([*short, b"x" * 70_000]) is None  # padding 20 ids to 70 kB each
    assert id_table([*short, b"x" * 1000]) is not None  # small enough to pad


def test_ids_with_line_feeds_or_lone_surrogates_are_held_by_the_table(tmp_path: Path) -> None:
    """(The corpus reader refuses lone surrogates in ids; the table holds them all the
    same.)"""
    ids = ["a", "a\ud800", "a\udfff", "a\ue000", "a\U00010000", "b\nc", "\udbff\udc00"]
    write_ids(tmp_path, ids)
    assert [f for f in ID_FILES if (tmp_path / f).exists()] == [ID_TABLE_FILE]
    stored = read_ids(tmp_path)
    assert isinstance(stored, IdTable) and list(stored) == ids
    assert [stored[i] for i in range(len(ids))] == ids
    assert [stored.position(doc_id) for doc_id in ids] == list(range(len(ids)))
    assert "a\ud801" not in stored


@pytest.mark.parametrize("layout", [IDS_FILE, JSON_IDS_FILE])
def test_a_corpus_entry_written_before_the_id_table_is_still_read(
    tmp_path: Path, layout: str
) -> None:
    cfg = write_corpus(tmp_path / "corpus.jsonl", PLAIN)
    open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    entry = the_entry(tmp_path)
    (entry / ID_TABLE_FILE).unlink()
    if layout == IDS_FILE:
        (entry / IDS_FILE).write_text("\n".join(PLAIN), encoding="utf-8")
    else:
        (entry / JSON_IDS_FILE).write_text(json.dumps(PLAIN), encoding="utf-8")
    reseal(entry)
    cache = StageCache(tmp_path / "cache", trust_fingerprints=True)
    lazy = open_corpus(cfg, cache, trust_mtime=True)
    assert cache.stats.stage("corpus").hits == 1 and cache.stats.stage("corpus").corrupt == 0
    assert isinstance(lazy.ids, tuple)
    assert_same_corpus(lazy, load_corpus(cfg))


def _int_ids(entry: Path) -> None:
    np.save(entry / ID_TABLE_FILE, np.arange(len(PLAIN)))


def _two_dimensional_ids(entry: Path) -> None:
    np.save(entry / ID_TABLE_FILE, np.array([[b"a"], [b"b"]]))


def _fewer_ids(entry: Path) -> None:
    np.save(entry / ID_TABLE_FILE, np.array([doc_id.encode() for doc_id in PLAIN[:-1]]))


def _float_lines(entry: Path) -> None:
    lines = np.load(entry / LINES_FILE)
    np.save(entry / LINES_FILE, lines.astype(np.float64))


def _truncated_ids(entry: Path) -> None:
    data = (entry / ID_TABLE_FILE).read_bytes()
    (entry / ID_TABLE_FILE).write_bytes(data[: len(data) // 2])


DAMAGE = {
    "ids as integers": _int_ids,
    "ids in two dimensions": _two_dimensional_ids,
    "one id fewer than lines": _fewer_ids,
    "lines as floats": _float_lines,
    "a truncated id table": _truncated_ids,
}


@pytest.mark.parametrize("resealed", [True, False], ids=["resealed", "checksum"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_id_table_or_line_index_rebuilds_the_entry(
    tmp_path: Path, damage: str, resealed: bool
) -> None:
    """Damage that keeps the checksums (the entry sealed again) is found by ``load``, other
    damage by the checksums; either way the entry is rebuilt from the file."""
    cfg = write_corpus(tmp_path / "corpus.jsonl", PLAIN)
    open_corpus(cfg, StageCache(tmp_path / "cache"), trust_mtime=True)
    entry = the_entry(tmp_path)
    DAMAGE[damage](entry)
    if resealed:
        reseal(entry)
    cache = StageCache(tmp_path / "cache", trust_fingerprints=True)
    again = open_corpus(cfg, cache, trust_mtime=True)
    stats = cache.stats.stage("corpus")
    assert (stats.corrupt, stats.misses, stats.hits) == (1, 1, 0)
    assert tuple(again.ids) == tuple(PLAIN)
    lazy, _ = built_and_warm(tmp_path, cfg)  # the rebuilt entry is whole again
    assert isinstance(lazy.ids, IdTable)
    assert_same_corpus(lazy, load_corpus(cfg))


def test_a_warm_corpus_decodes_no_id_it_is_not_asked_for(tmp_path: Path) -> None:
    """Opening the corpus and looking ids up reads neither a list of every id nor every
    line: the id table and the line index stay memory maps."""
    cfg = write_corpus(tmp_path / "corpus.jsonl", PLAIN)
    lazy, _ = built_and_warm(tmp_path, cfg)
    assert lazy.get("doc-0007").id == "doc-0007" and lazy.positions["doc-0031"] == 31
    assert lazy.ids[12] == "doc-0012"
    documents = lazy.documents
    assert isinstance(documents, JsonlDocuments) and isinstance(documents.ids, IdTable)
    assert isinstance(documents.ids.table.base, np.memmap)
    assert isinstance(documents.lines.base, np.memmap)
    assert sorted(documents._read) == [7]


def test_an_unknown_evidence_document_is_named_with_the_closest_id_of_a_warm_corpus(
    tmp_path: Path,
) -> None:
    """The golden set's hint lists every id (the one caller of a warm run that does)."""
    cfg = write_corpus(tmp_path / "corpus.jsonl", PLAIN)
    lazy, _ = built_and_warm(tmp_path, cfg)
    assert isinstance(lazy.ids, IdTable)
    golden = tmp_path / "golden.jsonl"
    case = {"id": "q1", "question": "which?", "evidence": [{"doc": "doc-00x7", "quote": "text"}]}
    golden.write_text(json.dumps(case) + "\n", encoding="utf-8")
    with pytest.raises(GoldenError, match=r"unknown doc 'doc-00x7'.*did you mean 'doc-00"):
        load_golden(GoldenConfig(path=str(golden)), lazy)
    case["evidence"] = [{"doc": "doc-0017", "quote": "text 17"}]
    golden.write_text(json.dumps(case) + "\n", encoding="utf-8")
    (found,) = load_golden(GoldenConfig(path=str(golden)), lazy).cases
    assert [(e.doc, e.start) for e in found.evidence] == [("doc-0017", 0)]
