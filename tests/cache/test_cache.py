"""Stage caches: key stability and sensitivity, reuse, corruption, concurrency, drift."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragsweep.cache.embeddings import EmbeddingStore
from ragsweep.cache.entries import META, VERIFIED, stat_fingerprint, verify_entry, write_json
from ragsweep.cache.stage import StageCache
from ragsweep.cli.cache import main as cache_main
from ragsweep.config.app import plain_config
from ragsweep.config.schema import ChunkingConfig, CorpusConfig, PreprocessConfig
from ragsweep.core.errors import DriftError
from ragsweep.data.corpus import load_corpus
from ragsweep.data.preprocess import build_preprocessor
from ragsweep.index.backends import BACKENDS
from ragsweep.index.base import IndexProvenance, Query
from ragsweep.index.encoding import ModelIdentity
from ragsweep.index.stages import chunks_key, index_key, rankings_key, texts_key
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import RunResult, run_evaluation
from tests.run.test_pipeline import project_overrides


def run(compose_config, project: Path, *extra: str) -> tuple[RunResult, dict[str, float]]:
    cfg = compose_config(*project_overrides(project, "tracking.enabled=false", *extra))
    resolved = plain_config(cfg)
    result = run_evaluation(resolve(resolved), project / "run")
    stats = {k: v for k, v in _cache_metrics(result).items()}
    return result, stats


def _cache_metrics(result: RunResult) -> dict[str, float]:
    return dict(result.cache_metrics)


def rankings(result: RunResult) -> list[list[tuple[str, float]]]:
    return [[(r.chunk_id, r.score) for r in case.retrieved] for case in result.cases]


# --- keys -------------------------------------------------------------------------------

KEY_SCRIPT = """
import sys, json
from ragsweep.config.schema import ChunkingConfig, CorpusConfig, PreprocessConfig
from ragsweep.data.corpus import load_corpus
from ragsweep.index.stages import chunks_key, texts_key
from ragsweep.data.preprocess import build_preprocessor
corpus = load_corpus(CorpusConfig(path=sys.argv[1]))
key = chunks_key(corpus, ChunkingConfig(mode="heading", size=300, overlap=30))
prep = build_preprocessor(PreprocessConfig(steps=("nfkc", "cleanup")))
cfg = ChunkingConfig(mode="heading", size=300, overlap=30, heading_prefix=True)
print(json.dumps([key, texts_key(key, cfg, prep)]))
"""


def test_keys_are_stable_across_processes(mini_project: Path) -> None:
    corpus = load_corpus(CorpusConfig(path=str(mini_project / "corpus")))
    key = chunks_key(corpus, ChunkingConfig(mode="heading", size=300, overlap=30))
    prep = build_preprocessor(PreprocessConfig(steps=("nfkc", "cleanup")))
    cfg = ChunkingConfig(mode="heading", size=300, overlap=30, heading_prefix=True)
    here = [key, texts_key(key, cfg, prep)]
    out = subprocess.run(
        [sys.executable, "-c", KEY_SCRIPT, str(mini_project / "corpus")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == here


def _changed(cfg: ChunkingConfig, name: str) -> ChunkingConfig:
    """``cfg`` with field ``name`` set to another valid value of its type."""
    value = getattr(cfg, name)
    valid = {"unit": "tokens", "tokenizer": "tokenizer.json"}  # strings with rules of their own
    other = {bool: lambda v: not v, int: lambda v: v + 1, float: lambda v: v / 2}
    changed = valid[name] if name in valid else other.get(type(value), lambda v: "heading")(value)
    return dataclasses.replace(cfg, **{name: changed})


def test_keys_change_with_each_relevant_input(mini_project: Path, monkeypatch) -> None:
    corpus = load_corpus(CorpusConfig(path=str(mini_project / "corpus")))
    base_cfg = ChunkingConfig(mode="fixed", size=200, overlap=20)
    base = chunks_key(corpus, base_cfg)
    raw = build_preprocessor(PreprocessConfig(steps=()))
    base_texts = texts_key(base, base_cfg, raw)
    stage_of = {f.name: f.metadata.get("stage", "own") for f in dataclasses.fields(base_cfg)}
    assert stage_of == {
        "mode": "own",
        "size": "own",
        "overlap": "own",
        "heading_prefix": "texts",
        "title_prefix": "texts",
        "unit": "own",
        "tokenizer": "own",
        "breakpoint_percentile": "own",
    }
    for name, stage in stage_of.items():  # every field: its own stage's key, and only it
        changed = _changed(base_cfg, name)
        moves_chunks = chunks_key(corpus, changed) != base
        # the tokenizer counts by its file's sha256 (ChunkTools), not its path
        assert moves_chunks == (stage == "own" and name != "tokenizer"), name
        if stage == "texts":
            assert texts_key(base, changed, raw) != base_texts, name
    (mini_project / "corpus" / "billing.md").write_text("changed", encoding="utf-8")
    changed_corpus = load_corpus(CorpusConfig(path=str(mini_project / "corpus")))
    assert chunks_key(changed_corpus, base_cfg) != base
    monkeypatch.setattr("ragsweep.index.stages.CHUNKER_SOURCE_DIGEST", "edited-chunker")
    assert chunks_key(corpus, base_cfg) != base

    nfkc = build_preprocessor(PreprocessConfig(steps=("nfkc",)))
    assert base_texts != texts_key(base, base_cfg, nfkc)
    syn = mini_project / "syn.yaml"
    syn.write_text("groups:\n  - [a, b]\n", encoding="utf-8")
    with_syn = PreprocessConfig(steps=("synonyms",), synonyms_path=str(syn))
    first = texts_key(base, base_cfg, build_preprocessor(with_syn))
    syn.write_text("groups:\n  - [a, c]\n", encoding="utf-8")
    assert texts_key(base, base_cfg, build_preprocessor(with_syn)) != first


# --- reuse through the pipeline ---------------------------------------------------------


def test_repeat_run_hits_every_stage(compose_config, mini_project: Path) -> None:
    first, cold = run(compose_config, mini_project)
    second, warm = run(compose_config, mini_project)
    assert cold["cache/chunks/misses"] == 1 and cold["cache/bm25_index/misses"] == 1
    for stage in ("chunks", "rankings"):
        assert warm[f"cache/{stage}/hits"] == 1, stage
        assert warm[f"cache/{stage}/misses"] == 0, stage
    for stage in ("texts", "bm25_index"):  # cached rankings need neither: not even opened
        assert f"cache/{stage}/hits" not in warm and f"cache/{stage}/misses" not in warm
    assert rankings(first) == rankings(second)
    assert [c.seconds for c in first.cases] == [c.seconds for c in second.cases]
    assert [c.metrics for c in first.cases] == [c.metrics for c in second.cases]


def test_rankings_follow_k_and_queries_but_not_the_scoring_rule(compose_config, mini_project):
    base, _ = run(compose_config, mini_project)
    _, rescored = run(compose_config, mini_project, "eval.min_span_overlap=0.5")
    assert rescored["cache/rankings/hits"] == 1  # a new hit rule re-scores the same rankings
    # the depth is max(max(ks), budget depth): 40 for 120/20 chunks and a 4,000-character budget
    _, same_depth = run(compose_config, mini_project, "eval.ks=[1,3,5,20]")
    assert same_depth["cache/rankings/hits"] == 1
    _, deeper = run(compose_config, mini_project, "eval.ks=[1,3,5,50]")
    assert deeper["cache/rankings/misses"] == 1
    _, bigger_budget = run(compose_config, mini_project, "eval.budgets=[8000]")
    assert bigger_budget["cache/rankings/misses"] == 1
    _, other_split = run(
        compose_config, mini_project, "eval.split=holdout", "eval.allow_holdout=true"
    )
    assert other_split["cache/rankings/misses"] == 1  # other questions
    _, other_queries = run(compose_config, mini_project, "preprocess=nfkc")
    assert other_queries["cache/rankings/misses"] == 1
    again, _ = run(compose_config, mini_project)
    assert rankings(again) == rankings(base)


def test_rankings_key_covers_texts_scopes_k_index_and_code(monkeypatch) -> None:
    from ragsweep.config.schema import RetrievalConfig

    bm25 = BACKENDS.get("bm25")
    retrieval = RetrievalConfig()

    def key_of(index="index", queries=None, depth=5, cfg=retrieval):
        return rankings_key(index, base_queries if queries is None else queries, cfg, depth, bm25)

    base_queries = [Query("a"), Query("b", np.array([True, False, True]))]
    key = key_of()
    assert key_of(queries=list(base_queries)) == key
    changed = [
        key_of(index="other index"),
        key_of(depth=6),
        key_of(queries=[Query("a"), Query("c", base_queries[1].allowed)]),
        key_of(queries=[Query("a"), Query("b", np.array([True, True, True]))]),
        key_of(queries=[Query("a"), Query("b")]),
        key_of(queries=base_queries[::-1]),
        key_of(cfg=RetrievalConfig(respect_scope=False)),
        rankings_key("index", base_queries, retrieval, 5, BACKENDS.get("use_m3")),
    ]
    assert key not in changed and len(set(changed)) == len(changed)
    monkeypatch.setattr(bm25, "search_code", "edited top-k selection")
    assert key_of() != key


def test_eval_golden_and_tracking_changes_keep_the_index(compose_config, mini_project: Path):
    run(compose_config, mini_project)
    _, stats = run(
        compose_config,
        mini_project,
        "eval.ks=[1,2]",
        "eval.objective=recall_at_2",
        "tracking.experiment=other",
        "golden.holdout_fraction=0.5",
    )
    # the index is never rebuilt (it is not even opened when the rankings are cached)
    assert stats.get("cache/bm25_index/misses", 0) == 0 and stats["cache/chunks/hits"] == 1


def test_overlap_change_rechunks_but_reuses_identical_vectors(compose_config, mini_project):
    _, cold = run(compose_config, mini_project, "embedding=use_m3", "chunking.overlap=0")
    assert cold["cache/embeddings/hits"] == 0
    _, other = run(compose_config, mini_project, "embedding=use_m3", "chunking.overlap=30")
    assert other["cache/chunks/misses"] == 1
    assert other["cache/embeddings/hits"] >= 1  # the first window of each doc is identical
    assert other["cache/embeddings/misses"] >= 1
    assert other["cache/query_embeddings/misses"] == 0  # queries shared across chunkings
    assert other["cache/query_embeddings/hits"] == 4  # every tuning question


# --- corruption -------------------------------------------------------------------------


def _entries(root: Path, stage: str) -> list[Path]:
    return sorted(p.parent for p in (root / stage).rglob("meta.json"))


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_entries_are_detected_and_recomputed(compose_config, mini_project, damage):
    clean, _ = run(compose_config, mini_project, "embedding=use_m3")
    root = Path(clean.cache_root)
    targets = [
        _entries(root, "chunks")[0] / "spans.npy",
        _entries(root, "embeddings")[0] / "vectors.npy",
        _entries(root, "dense_index")[0] / "vectors.npy",
        _entries(root, "rankings")[0] / "indices.npy",
    ]
    for path in targets:
        data = bytearray(path.read_bytes())
        if damage == "truncate":
            path.write_bytes(bytes(data[: len(data) // 2]))
        else:
            data[-5] ^= 0xFF
            path.write_bytes(bytes(data))
    again, stats = run(compose_config, mini_project, "embedding=use_m3")
    assert stats["cache/chunks/corrupt"] == 1 and stats["cache/chunks/misses"] == 1
    assert stats["cache/dense_index/corrupt"] == 1
    assert stats["cache/rankings/corrupt"] == 1 and stats["cache/rankings/misses"] == 1
    assert stats["cache/embeddings/corrupt"] >= 1  # the damaged shard was read and refused
    assert rankings(again) == rankings(clean)
    for stage in ("chunks", "embeddings", "dense_index", "rankings"):
        for entry in _entries(root, stage):
            verify_entry(entry)  # everything left on disk is valid again


def test_trusted_fingerprints_hash_an_entry_again_only_once_a_file_changed(
    tmp_path: Path,
) -> None:
    """With ``trust_fingerprints`` (``cache.trust_mtime``) a hit hashes the entry's files
    once, records their fingerprints, and hashes again only when one changed: a same-size
    rewrite with its mtime set back is still found (ctime) and recomputed."""
    builds: list[int] = []

    def build(folder: Path) -> None:
        builds.append(1)
        (folder / "data.bin").write_bytes(bytes(range(256)) * 64)

    def load(folder: Path) -> bytes:
        return (folder / "data.bin").read_bytes()

    cache = StageCache(tmp_path / "cache", trust_fingerprints=True)
    first = cache.get_or_build("stage", "k" * 64, build, load)
    entry = cache.entry_dir("stage", "k" * 64)
    assert not (entry / VERIFIED).exists()  # just built: nothing read back from disk yet
    assert cache.get_or_build("stage", "k" * 64, build, load) == first
    recorded = json.loads((entry / VERIFIED).read_text(encoding="utf-8"))
    assert recorded["files"] == {"data.bin": stat_fingerprint((entry / "data.bin").stat())}
    assert cache.get_or_build("stage", "k" * 64, build, load) == first
    assert len(builds) == 1 and cache.stats.stage("stage").hits == 2

    path = entry / "data.bin"
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert cache.get_or_build("stage", "k" * 64, build, load) == first  # rebuilt, not served
    assert len(builds) == 2 and cache.stats.stage("stage").corrupt == 1

    # what is trusted is the record: a checksum no longer matching the file, under a
    # record that says the entry was verified as it is, is served by a trusting cache
    # only; ragsweep-cache verify and an untrusting cache hash the files and refuse it
    cache.get_or_build("stage", "k" * 64, build, load)  # a hit: records the new files
    meta = json.loads((entry / META).read_text(encoding="utf-8"))
    meta["files"]["data.bin"] = "0" * 64
    (entry / META).write_text(json.dumps(meta), encoding="utf-8")
    forged = {
        "meta": hashlib.sha256((entry / META).read_bytes()).hexdigest(),
        "files": {"data.bin": stat_fingerprint(path.stat())},
    }
    (entry / VERIFIED).write_text(json.dumps(forged), encoding="utf-8")
    trusting = StageCache(tmp_path / "cache", trust_fingerprints=True)
    assert trusting.get_or_build("stage", "k" * 64, build, load) == first
    assert trusting.stats.stage("stage").hits == 1 and len(builds) == 2
    hashing = StageCache(tmp_path / "cache")
    assert hashing.get_or_build("stage", "k" * 64, build, load) == first
    assert hashing.stats.stage("stage").corrupt == 1 and len(builds) == 3


# --- concurrency ------------------------------------------------------------------------


def _worker(overrides: list[str], out: str, queue) -> None:  # pragma: no cover - subprocess
    from hydra import compose, initialize_config_dir

    from ragsweep.config.app import config_dir

    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    resolved = plain_config(cfg)
    result = run_evaluation(resolve(resolved), Path(out))
    queue.put(rankings(result))


def test_two_processes_building_the_same_index(tmp_path: Path, mini_project: Path) -> None:
    overrides = [
        f"paths.output_dir={tmp_path / 'outputs'}",
        *project_overrides(mini_project, "tracking.enabled=false", "embedding=use_m3"),
    ]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(overrides, str(tmp_path / f"run{i}"), queue))
        for i in range(2)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert results[0] == results[1]
    root = tmp_path / "outputs" / "cache"
    for stage in ("chunks", "texts", "dense_index"):
        assert len(_entries(root, stage)) == 1, stage
    for entry in _entries(root, "embeddings"):
        verify_entry(entry)


# --- drift and the store ----------------------------------------------------------------


def test_cached_index_with_other_provenance_is_a_drift_error(tmp_path: Path) -> None:
    model = ModelIdentity("use_m3", "m", "1", 512, True)
    expected = IndexProvenance(model, {"steps": []}, "ck", "corpus", 3)
    stored = dataclasses.replace(expected, model=dataclasses.replace(model, version="2"))
    write_json(tmp_path / "provenance.json", dataclasses.asdict(stored))
    with pytest.raises(DriftError, match="model"):
        expected.check_stored(tmp_path)
    other = dataclasses.replace(model, dimension=384)
    dense = BACKENDS.get("use_m3")
    assert index_key("t", model, dense) != index_key("t", other, dense)


def test_index_and_text_keys_follow_version_and_code(monkeypatch) -> None:
    model = ModelIdentity("bm25", "bm25s-lucene", "0.3", 0, False)
    bm25, use_m3 = BACKENDS.get("bm25"), BACKENDS.get("use_m3")
    dense, sparse = index_key("t", model, use_m3), index_key("t", model, bm25)
    raw = build_preprocessor(PreprocessConfig(steps=()))
    texts = texts_key("c", ChunkingConfig(), raw)
    monkeypatch.setattr("ragsweep.index.stages.__version__", "99.0")
    assert index_key("t", model, use_m3) != dense  # an upgrade rebuilds instead of failing
    monkeypatch.undo()
    monkeypatch.setattr(bm25, "index_code", "edited tokenizer")
    assert index_key("t", model, bm25) != sparse
    assert index_key("t", model, use_m3) == dense
    monkeypatch.setattr("ragsweep.index.stages.preprocess_code_digest", lambda: "edited cleanup")
    assert texts_key("c", ChunkingConfig(), raw) != texts


def test_embedding_store_embeds_each_distinct_text_once(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def encode(texts):
        calls.append(list(texts))
        return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    store = EmbeddingStore(StageCache(tmp_path), "model-key", 2)
    first = store.embed(["a", "bb", "a"], encode, "embeddings")
    second = EmbeddingStore(StageCache(tmp_path), "model-key", 2).embed(
        ["bb", "ccc"], encode, "embeddings"
    )
    assert calls == [["a", "bb"], ["ccc"]]
    assert first.tolist() == [[1, 1], [2, 1], [1, 1]]
    assert second.tolist() == [[2, 1], [3, 1]]
    other_model = EmbeddingStore(StageCache(tmp_path), "other-key", 2)
    other_model.embed(["a"], encode, "embeddings")
    assert calls[-1] == ["a"]  # another model identity never shares vectors


def test_disabled_cache_writes_nothing(compose_config, mini_project: Path) -> None:
    result, stats = run(compose_config, mini_project, "cache.enabled=false")
    assert stats["cache/chunks/misses"] == 1
    assert not (mini_project / "run" / "cache").exists()
    assert result.cache_root is None


def test_cache_cli_stats_prune_and_verify(compose_config, mini_project: Path, capsys) -> None:
    result, _ = run(compose_config, mini_project)
    root = str(result.cache_root)
    assert cache_main(["--cache-dir", root, "stats"]) == 0
    assert "bm25_index" in capsys.readouterr().out
    assert cache_main(["--cache-dir", root, "verify"]) == 0
    assert cache_main(["--cache-dir", root, "prune", "--older-than", "30d"]) == 0
    assert len(_entries(Path(root), "chunks")) == 1  # used just now: kept
    assert cache_main(["--cache-dir", root, "prune", "--older-than", "0s"]) == 0
    assert _entries(Path(root), "chunks") == []


def test_cached_rankings_still_check_the_query_side(tmp_path: Path) -> None:
    from ragsweep.index.backends.dense import build_dense_index
    from ragsweep.index.encoding import l2_normalize
    from ragsweep.index.stages import cached_rankings
    from tests.index.test_index import DENSE_ID, FakeEncoder, provenance

    vectors = l2_normalize(np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32))
    index = build_dense_index(vectors, FakeEncoder(DENSE_ID), provenance(DENSE_ID, 3))
    cache, queries, raw = StageCache(tmp_path), [Query("abcdefghij")], {"steps": []}
    searches: list[int] = []

    def search(searched: Any) -> list:
        searches.append(1)
        return searched.search(queries, 2, raw)

    opened: list[int] = []

    def open_index() -> Any:
        opened.append(1)
        return index

    first = cached_rankings(open_index, "k", queries, raw, 2, search, cache)
    again = cached_rankings(open_index, "k", queries, raw, 2, search, cache)
    assert len(searches) == 1 and cache.stats.stage("rankings").hits == 1
    assert len(opened) == 1  # a hit does not open the index
    assert [r.indices.tolist() for r in again] == [r.indices.tolist() for r in first] == [[0, 2]]
    with pytest.raises(DriftError, match="preprocess"):  # on a hit
        cached_rankings(open_index, "k", queries, {"steps": ["nfkc"]}, 2, search, cache)
    with pytest.raises(DriftError, match="preprocess"):  # on a miss
        cached_rankings(open_index, "k2", queries, {"steps": ["nfkc"]}, 2, search, cache)


def test_an_encoder_that_reports_another_model_is_refused_and_not_kept(monkeypatch) -> None:
    from types import SimpleNamespace

    from ragsweep.config.schema import EmbeddingConfig
    from ragsweep.index.backends.dense import _ENCODERS, shared_encoder
    from ragsweep.index.encoding import ModelIdentity

    resolved = ModelIdentity("ollama", "m", "1", 8, True, digest="a" * 64)
    loaded = dataclasses.replace(resolved, digest="b" * 64)  # re-pulled in between
    before = dict(_ENCODERS)
    with pytest.raises(DriftError, match="encoder reports"):
        shared_encoder(
            EmbeddingConfig(backend="ollama", model="m"),
            resolved,
            lambda cfg: SimpleNamespace(identity=loaded, batch_size=1),
        )
    assert before == _ENCODERS


def test_prune_removes_stale_leftover_temporaries_files_and_folders(
    compose_config, mini_project: Path, capsys
) -> None:
    from ragsweep.cli.cache import STALE_TEMP_SECONDS

    result, _ = run(compose_config, mini_project)
    root = Path(result.cache_root)
    entry = _entries(root, "chunks")[0]
    stale_file = entry / f"{VERIFIED}.tmp-0badc0de"  # a verification write that was killed
    fresh_file = entry / f"{VERIFIED}.tmp-12345678"  # one being written right now
    stale_folder = root / "chunks" / ".tmp-0123"  # a build that was killed
    stale_file.write_text("{", encoding="utf-8")
    fresh_file.write_text("{", encoding="utf-8")
    stale_folder.mkdir()
    old = time.time() - STALE_TEMP_SECONDS - 60
    for path in (stale_file, stale_folder):
        os.utime(path, (old, old))
    assert cache_main(["--cache-dir", str(root), "prune", "--older-than", "30d"]) == 0
    assert "and 2 leftover temporaries" in capsys.readouterr().out
    assert not stale_file.exists() and not stale_folder.exists()
    assert fresh_file.exists() and not list(root.rglob(".trash-*"))
    assert len(_entries(root, "chunks")) == 1


SLOW_BUILDER = """
import sys, time
from pathlib import Path
from ragsweep.cache.stage import StageCache

root, key, started, release = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])


def build(folder):
    (folder / "first").write_text("a", encoding="utf-8")
    told = started.with_name(started.name + ".part")
    told.write_text(str(folder), encoding="utf-8")
    told.rename(started)  # whole when it appears
    while not release.exists():  # computing, with no file created for a long time
        time.sleep(0.02)
    (folder / "second").write_text("b", encoding="utf-8")


cache = StageCache(Path(root))
print(cache.get_or_build("slow", key, build, lambda f: (f / "second").read_text("utf-8")))
"""


def _start_builder(root: Path, key: str, work: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process building ``key`` that stops computing until ``work/release-<key>`` exists;
    returns it and the temporary folder it builds into."""
    started, release = work / f"started-{key[:4]}", work / f"release-{key[:4]}"
    builder = subprocess.Popen(
        [sys.executable, "-c", SLOW_BUILDER, str(root), key, str(started), str(release)],
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not started.exists():
        assert builder.poll() is None and time.monotonic() < deadline, "builder did not start"
        time.sleep(0.02)
    return builder, Path(started.read_text(encoding="utf-8"))


def test_prune_keeps_an_old_temporary_whose_builder_holds_its_lock(tmp_path: Path, capsys) -> None:
    """A build that computes for over an hour without creating a file keeps its folder
    (its key's lock is held); a builder that was killed mid-build loses its folder once
    the folder is an hour old, as before."""
    from ragsweep.cli.cache import STALE_TEMP_SECONDS

    root = tmp_path / "cache"
    alive, alive_folder = _start_builder(root, "a" * 64, tmp_path)
    killed, killed_folder = _start_builder(root, "b" * 64, tmp_path)
    killed.kill()
    killed.wait(timeout=30)
    assert alive_folder.name.startswith(".tmp-" + "a" * 64 + ".") and killed_folder.is_dir()
    old = time.time() - STALE_TEMP_SECONDS - 60
    for folder in (alive_folder, killed_folder):
        os.utime(folder, (old, old))
    try:
        assert cache_main(["--cache-dir", str(root), "prune", "--older-than", "30d"]) == 0
        assert "and 1 leftover temporaries" in capsys.readouterr().out
        assert alive_folder.is_dir() and not killed_folder.exists()
    finally:
        (tmp_path / "release-aaaa").touch()
        out, _ = alive.communicate(timeout=60)
    assert alive.returncode == 0 and out.strip() == "b"
    assert (root / "slow" / "aa" / ("a" * 64) / "second").read_text(encoding="utf-8") == "b"
    assert not list((root / "slow").glob(".tmp-*"))
