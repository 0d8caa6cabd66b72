"""Cache faults, reproduced for real: read-only mounts, full file systems, malformed entry
metadata, several corrupt shards in one call, a cache.dir that is a file (issue 12, item 5).

Read-only and full file systems are real mounts (a read-only bind mount, a tmpfs with a
size limit): tests run as root, for whom chmod alone does not make a directory read-only.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from ragsweep.cache.embeddings import EmbeddingStore
from ragsweep.cache.entries import verify_entry, verify_shard
from ragsweep.cache.stage import StageCache
from ragsweep.config.app import plain_config
from ragsweep.config.schema import EmbeddingConfig
from ragsweep.core.errors import CacheError
from ragsweep.core.hashing import sha256_file
from ragsweep.index.backends.use_m3 import UseM3Encoder
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import RunResult, run_evaluation
from tests.reliability.conftest import MountFn, fill, run_command
from tests.run.test_pipeline import project_overrides


def cli_args(project: Path, out: Path, cache: Path, *extra: str) -> list[str]:
    return [
        f"paths.output_dir={out}",
        f"cache.dir={cache}",
        "tracking.enabled=false",
        *project_overrides(project),
        *extra,
    ]


def run_cases(out: Path) -> list[dict]:
    """The rows of the single run's cases.jsonl under ``out``."""
    (path,) = out.glob("runs/*/*/cases.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def retrieved(rows: list[dict]) -> list[list[str]]:
    return [row["retrieved"]["chunk_id"] for row in rows]


def snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Every file below ``root`` with its size and sha256."""
    return {
        p.relative_to(root).as_posix(): (p.stat().st_size, sha256_file(p))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def evaluate(compose_config, project: Path, cache: Path, *extra: str) -> RunResult:
    """One in-process run (metrics available), tracking off."""
    cfg = compose_config(
        *project_overrides(project, "tracking.enabled=false", f"cache.dir={cache}", *extra)
    )
    resolved = plain_config(cfg)
    return run_evaluation(resolve(resolved), project / "run")


def ranked(result: RunResult) -> list[list[str]]:
    return [[r.chunk_id for r in case.retrieved] for case in result.cases]


# --- read-only stores ------------------------------------------------------------------


def test_a_read_only_cache_full_of_entries_serves_them(
    tmp_path: Path, mini_project: Path, mounts: MountFn
) -> None:
    cache = tmp_path / "cache"
    warm = run_command("ragsweep", *cli_args(mini_project, tmp_path / "w", cache), cwd=tmp_path)
    assert warm.returncode == 0, warm.stderr[-2000:]
    before = snapshot(cache)
    view = mounts(tmp_path / "ro", "ro-bind", cache)
    with pytest.raises(OSError, match="Read-only"):
        (view / "probe").write_text("x")  # the mount really refuses root's writes
    out = run_command("ragsweep", *cli_args(mini_project, tmp_path / "r", view), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert f"{view} refuses writes" in out.stdout  # Hydra's log handler prints to stdout
    assert retrieved(run_cases(tmp_path / "r")) == retrieved(run_cases(tmp_path / "w"))
    assert snapshot(cache) == before


def test_an_empty_read_only_cache_computes_everything_and_stores_nothing(
    tmp_path: Path, mini_project: Path, mounts: MountFn
) -> None:
    view = mounts(tmp_path / "ro", "ro-tmpfs")
    out = run_command("ragsweep", *cli_args(mini_project, tmp_path / "r", view), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert f"{view} refuses writes" in out.stdout
    assert "read-only store: nothing new stored" in " ".join(out.stderr.split())
    assert list(view.iterdir()) == []
    fresh = run_command(
        "ragsweep", *cli_args(mini_project, tmp_path / "w", tmp_path / "c"), cwd=tmp_path
    )
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert retrieved(run_cases(tmp_path / "r")) == retrieved(run_cases(tmp_path / "w"))


def test_a_read_only_cache_with_a_corrupt_entry_and_unseen_texts(
    compose_config, tmp_path: Path, mini_project: Path, mounts: MountFn
) -> None:
    cache = tmp_path / "cache"
    clean = evaluate(compose_config, mini_project, cache, "embedding=use_m3")
    (chunks_entry,) = (p.parent for p in (cache / "chunks").rglob("meta.json"))
    data = chunks_entry / "spans.npy"
    data.write_bytes(data.read_bytes()[:-7])  # truncated: fails its checksum
    before = snapshot(cache)
    view = mounts(tmp_path / "ro", "ro-bind", cache)

    again = evaluate(compose_config, mini_project, view, "embedding=use_m3")
    assert again.cache_metrics["cache/chunks/corrupt"] == 1
    assert again.cache_metrics["cache/chunks/misses"] == 1
    assert ranked(again) == ranked(clean)

    other = evaluate(compose_config, mini_project, view, "embedding=use_m3", "chunking.size=90")
    assert other.cache_metrics["cache/embeddings/misses"] > 0  # new texts, kept in memory
    assert other.cache_metrics["cache/dense_index/misses"] == 1
    assert snapshot(cache) == before  # nothing written, the corrupt entry left for verify

    verify = run_command("ragsweep-cache", "--cache-dir", str(view), "verify", cwd=tmp_path)
    assert verify.returncode == 1
    assert f"corrupt: {view / chunks_entry.relative_to(cache)}" in verify.stdout
    assert "NOT removed: store is read-only" in verify.stdout
    prune = run_command(
        "ragsweep-cache", "--cache-dir", str(view), "prune", "--older-than", "0s", cwd=tmp_path
    )
    assert prune.returncode == 1
    assert "removed 0 entries" in prune.stdout and "could not remove" in prune.stdout
    assert snapshot(cache) == before


# --- malformed metadata ----------------------------------------------------------------


def _rewrite_meta(entry: Path, change) -> None:
    meta = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
    (entry / "meta.json").write_text(json.dumps(change(meta)), encoding="utf-8")


def _reseal(entry: Path, name: str) -> None:
    """Record ``name``'s current checksum, so only its content/layout is wrong."""
    _rewrite_meta(entry, lambda m: {**m, "files": {**m["files"], name: sha256_file(entry / name)}})


def _stage_entry(cache: Path, stage: str) -> Path:
    return sorted(p.parent for p in (cache / stage).rglob("meta.json"))[0]


def _shard_of_most_rows(cache: Path) -> Path:
    shards = [p.parent for p in (cache / "embeddings").rglob("meta.json")]
    return max(shards, key=lambda s: len(json.loads((s / "keys.json").read_text())))


MALFORMED = {
    "compute_seconds is text": (
        "chunks",
        lambda e: _rewrite_meta(e, lambda m: {**m, "compute_seconds": "fast"}),
    ),
    "compute_seconds is null": (
        "rankings",
        lambda e: _rewrite_meta(e, lambda m: {**m, "compute_seconds": None}),
    ),
    "meta is a list": ("texts", lambda e: (e / "meta.json").write_text("[1, 2]")),
    "a file name leaves the entry": (
        "chunks",
        lambda e: _rewrite_meta(e, lambda m: {**m, "files": {"../../../x": "0" * 64}}),
    ),
    "a checksum is not a digest": (
        "dense_index",
        lambda e: _rewrite_meta(e, lambda m: {**m, "files": dict.fromkeys(m["files"], 7)}),
    ),
    "shard compute_seconds is text": (
        "embeddings",
        lambda e: _rewrite_meta(e, lambda m: {**m, "compute_seconds": "slow"}),
    ),
    "shard keys.json is an object (checksum updated)": (
        "embeddings",
        lambda e: ((e / "keys.json").write_text('{"a": 1}'), _reseal(e, "keys.json")),
    ),
    "shard vectors lack rows (checksum updated)": (
        "embeddings",
        lambda e: (
            np.save(e / "vectors.npy", np.load(e / "vectors.npy")[:1], allow_pickle=False),
            _reseal(e, "vectors.npy"),
        ),
    ),
}


LATER_STAGES = {
    "embeddings": ("dense_index", "rankings"),
    "texts": ("dense_index", "rankings"),
    "dense_index": ("rankings",),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_malformed_metadata_is_recomputed_and_caught_by_verify(
    compose_config, tmp_path: Path, mini_project: Path, kind: str
) -> None:
    stage, damage = MALFORMED[kind]
    cache = tmp_path / "cache"
    clean = evaluate(compose_config, mini_project, cache, "embedding=use_m3")
    pick = _shard_of_most_rows if stage == "embeddings" else (lambda c: _stage_entry(c, stage))
    # make the run read the damaged entry again: cached rankings need no index, a cached
    # index needs neither texts nor vectors
    for later_stage in LATER_STAGES.get(stage, ()):
        for entry in (cache / later_stage).rglob("meta.json"):
            (entry.parent / "meta.json").unlink()

    damaged_copy = tmp_path / "copy"
    for target_cache in (cache, damaged_copy):
        if target_cache is damaged_copy:
            evaluate(compose_config, mini_project, damaged_copy, "embedding=use_m3")
        damage(pick(target_cache))

    verify = run_command("ragsweep-cache", "--cache-dir", str(damaged_copy), "verify", cwd=tmp_path)
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert "1 corrupt" in verify.stdout and "removed" in verify.stdout
    again_verified = run_command(
        "ragsweep-cache", "--cache-dir", str(damaged_copy), "verify", cwd=tmp_path
    )
    assert again_verified.returncode == 0, again_verified.stdout

    again = evaluate(compose_config, mini_project, cache, "embedding=use_m3")
    counted = ("embeddings", "query_embeddings") if stage == "embeddings" else (stage,)
    assert sum(again.cache_metrics[f"cache/{name}/corrupt"] for name in counted) >= 1
    assert ranked(again) == ranked(clean)
    for meta in cache.rglob("meta.json"):
        stage_name = meta.relative_to(cache).parts[0]
        (verify_shard if stage_name == "embeddings" else verify_entry)(meta.parent)


# --- several corrupt shards in one call ------------------------------------------------


def test_several_corrupt_shards_needed_by_one_call_are_recomputed(tmp_path: Path) -> None:
    encoder = UseM3Encoder(EmbeddingConfig(backend="use_m3", options={"threads": 1}))
    identity = encoder.identity

    def store() -> EmbeddingStore:
        return EmbeddingStore(StageCache(tmp_path), identity.key, identity.dimension)

    batches = [["refunds take 14 days"], ["export as zip"], ["VPN サーバー"], ["sla"]]
    for batch in batches:  # one shard per batch
        store().embed(batch, encoder.encode, "embeddings")
    shards = sorted(p for p in (tmp_path / "embeddings" / identity.key).iterdir())
    assert len(shards) == 4
    for shard in (shards[0], shards[2], shards[3]):
        vectors = shard / "vectors.npy"
        data = bytearray(vectors.read_bytes())
        data[-3] ^= 0xFF
        vectors.write_bytes(bytes(data))

    encoded: list[str] = []

    def encode_and_record(texts):
        encoded.extend(texts)
        return encoder.encode(texts)

    fresh = store()
    texts = [t for batch in batches for t in batch]
    vectors = fresh.embed(texts, encode_and_record, "embeddings")
    assert sorted(encoded) == sorted(batches[0] + batches[2] + batches[3])
    np.testing.assert_allclose(vectors, encoder.encode(texts), rtol=1e-5, atol=1e-6)
    assert fresh.cache.stats.stage("embeddings").corrupt == 3
    for shard in (tmp_path / "embeddings" / identity.key).iterdir():
        verify_shard(shard, identity.dimension)


# --- full disks ------------------------------------------------------------------------


def test_a_full_cache_disk_names_cache_dir_and_what_to_do(
    tmp_path: Path, mini_project: Path, mounts: MountFn
) -> None:
    disk = mounts(tmp_path / "disk", "tmpfs", size="256k")
    fill(disk, leave_bytes=4096)
    cache = disk / "cache"
    out = run_command("ragsweep", *cli_args(mini_project, tmp_path / "out", cache), cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    message = " ".join(out.stderr.split())
    assert f"error: cache.dir={cache}: no space left on the device" in message
    assert "prune --older-than" in message and "cache.enabled=false" in message
    assert not [p for p in cache.rglob(".tmp-*")]  # the half-written entry was removed
    assert not list((tmp_path / "out").glob("runs/*/*/cases.jsonl"))


def test_a_numpy_short_write_on_a_full_disk_names_cache_dir(
    tmp_path: Path, mounts: MountFn
) -> None:
    """numpy reports a short write as "N requested and M written", without an errno."""
    disk = mounts(tmp_path / "disk", "tmpfs", size="128k")
    cache = StageCache(disk / "cache")
    big = np.ones((512, 512), dtype=np.float32)  # 1 MiB: cannot fit

    def build(folder: Path) -> None:
        np.save(folder / "vectors.npy", big, allow_pickle=False)

    with pytest.raises(CacheError) as info:
        cache.get_or_build("dense_index", "ab" * 32, build, lambda folder: None)
    message = str(info.value)
    assert message.startswith(f"cache.dir={disk / 'cache'}: no space left on the device")
    assert "requested and" in message  # numpy's own words, kept as the cause
    assert not list((disk / "cache").rglob(".tmp-*"))
    assert not list((disk / "cache").rglob("vectors.npy"))


def many_cases_project(project: Path, n: int) -> Path:
    """``project``'s corpus with a golden set of ``n`` answerable cases."""
    rows = [
        {
            "id": f"q{i:04d}",
            "question": "How long do refunds take?",
            "split": "tuning",
            "evidence": [{"doc": "billing.md", "quote": "Refunds are issued within 14 days"}],
        }
        for i in range(n)
    ]
    path = project / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return project


def test_a_full_run_directory_leaves_no_truncated_cases_file(
    tmp_path: Path, mini_project: Path, mounts: MountFn
) -> None:
    project = many_cases_project(mini_project, 600)
    disk = mounts(tmp_path / "disk", "tmpfs", size="160k")
    run_dir = disk / "run"
    out = run_command(
        "ragsweep",
        *cli_args(project, tmp_path / "out", tmp_path / "cache"),
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    message = " ".join(out.stderr.split())
    assert f"error: run directory {run_dir}: cannot write the run's artifacts" in message
    assert "the disk is full" in message and "paths.output_dir" in message
    names = sorted(p.name for p in run_dir.iterdir())
    assert "cases.jsonl" not in names
    assert not [n for n in names if ".tmp-" in n]
    if (run_dir / "config.yaml").exists():  # written before the disk filled: complete
        written = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
        assert written["golden"]["path"] == str(project / "golden.jsonl")
        assert "sweep" in written  # the last key: the file is whole


# --- cache.dir that is not a directory --------------------------------------------------


@pytest.mark.parametrize("below", [False, True])
def test_cache_dir_that_is_a_file_fails_before_work(
    tmp_path: Path, mini_project: Path, below: bool
) -> None:
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    cache = a_file / "sub" if below else a_file
    out = run_command("ragsweep", *cli_args(mini_project, tmp_path / "out", cache), cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    what = f"cannot be created: {a_file} is a file" if below else "is a file"
    assert f"error: cache.dir={cache} {what}, not a directory" in " ".join(out.stderr.split())
    assert not list((tmp_path / "out").glob("runs/*/*/*.jsonl"))
    cli = run_command("ragsweep-cache", "--cache-dir", str(a_file), "verify", cwd=tmp_path)
    assert cli.returncode == 2 and "is a file" in cli.stderr
