"""The cost curve: time per stage and peak memory from 10k to 1M chunks (see bench/README.md).

    python bench/bench_scale.py curve                      # BM25 and dense, every size
    python bench/bench_scale.py curve --backend bm25 --sizes 10000 30000
    python bench/bench_scale.py profile --backend bm25 --size 300000 --mode warm

The corpus and golden set are synthetic and deterministic (bench/scale_corpus.py), written
under ``--work`` (default: a temporary directory), never into the repository. Every size
runs twice, each in its own process: *cold* (an empty stage cache, tracking off) and *warm*
(the same cache again, logging to a local SQLite MLflow store created beforehand). The
dense index is ragsweep's own dense backend over a hashed bag-of-words encoder
(``embedding=hashed_bow``, registered by the bench), so the curve measures ragsweep's
embedding store, index, search, scoring, artifacts and logging, not a model. Results go
to ``outputs/bench/scale.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import json
import math
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
RESULTS = REPO / "outputs" / "bench" / "scale.json"
CONF = BENCH / "scale_conf"
SIZES = {
    "bm25": (10_000, 30_000, 100_000, 300_000, 1_000_000),
    "hashed_bow": (10_000, 30_000, 100_000, 200_000),
}
CHUNK_SIZE = 200
CHUNKS_PER_DOC = 8
STAGES = (
    "compose_seconds",
    "load_seconds",
    "store_seconds",
    "chunk_seconds",
    "embed_seconds",
    "eval_seconds",
    "artifacts_seconds",
    "log_seconds",
)


def spec_for(n_chunks: int) -> Any:
    from scale_corpus import CorpusSpec

    return CorpusSpec(n_docs=n_chunks // CHUNKS_PER_DOC, chunk_size=CHUNK_SIZE)


def data_files(work: Path, n_chunks: int) -> tuple[Path, Path]:
    folder = work / "data" / str(n_chunks)
    return folder / "corpus.jsonl", folder / "golden.jsonl"


def cache_dir(work: Path, backend: str, n_chunks: int) -> Path:
    return work / "cache" / backend / str(n_chunks)


def overrides(work: Path, n_chunks: int, backend: str, tracking: bool) -> list[str]:
    corpus, golden = data_files(work, n_chunks)
    return [
        f"paths.output_dir={work}",
        "corpus=squad",  # a JSONL corpus; its path is ours
        f"corpus.path={corpus}",
        f"golden.path={golden}",
        f"embedding={backend}",
        "chunking=fixed",
        f"chunking.size={CHUNK_SIZE}",
        "chunking.overlap=0",
        f"cache.dir={cache_dir(work, backend, n_chunks)}",
        f"tracking.enabled={str(tracking).lower()}",
        f"tracking.default_db={work / 'mlflow.db'}",
        f"tracking.default_artifacts={work / 'mlartifacts'}",
    ]


# --- inside a subprocess ------------------------------------------------------------------


def generate(work: Path, n_chunks: int) -> dict[str, Any]:
    from scale_corpus import write_corpus, write_golden

    corpus, golden = data_files(work, n_chunks)
    corpus.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    spec = spec_for(n_chunks)
    if not corpus.is_file():
        write_corpus(spec, corpus)
    if not golden.is_file():
        write_golden(spec, golden)
    return {"seconds": round(time.perf_counter() - started, 1), "bytes": corpus.stat().st_size}


def prime_store(work: Path) -> dict[str, Any]:
    """Create the SQLite store and experiment, so no measured run pays MLflow's migrations."""
    from ragsweep.config.app import compose, plain_config
    from ragsweep.run.config import resolve
    from ragsweep.tracking.store import prepare_store

    generate(work, 10_000)
    cfg = resolve(plain_config(compose(overrides(work, 10_000, "bm25", True)))).cfg
    started = time.perf_counter()
    prepare_store(cfg.tracking)
    return {"seconds": round(time.perf_counter() - started, 1)}


CPU_SECONDS: dict[str, float] = {}
"""CPU seconds (``time.process_time``: every thread of the process) per stage of the run."""


def record_cpu_per_stage() -> None:
    """Keep each stage's CPU seconds (``Timer.cpu_seconds``, recorded beside its wall
    seconds) of the run's timer: on a shared machine the CPU time is the steadier figure
    (it does not count waiting for a core), so the exponents are fitted on it too."""
    from ragsweep.run.pipeline import Timer

    wall_stage = Timer.stage

    @contextmanager
    def stage(self: Timer, name: str) -> Iterator[None]:
        with wall_stage(self, name):
            yield
        CPU_SECONDS.update(self.cpu_seconds)

    Timer.stage = stage  # type: ignore[method-assign]


def measure(work: Path, n_chunks: int, backend: str, mode: str) -> dict[str, Any]:
    """One run; ``mode`` is ``cold`` (tracking off) or ``warm`` (tracking on)."""
    from rich.console import Console

    from ragsweep.config.app import compose, plain_config
    from ragsweep.run.config import resolve
    from ragsweep.run.pipeline import run_evaluation
    from scale_corpus import register_hashed_backend

    register_hashed_backend()
    record_cpu_per_stage()
    out = work / "runs" / f"{backend}-{n_chunks}-{mode}"
    started, cpu_started = time.perf_counter(), time.process_time()
    resolved = resolve(plain_config(compose(overrides(work, n_chunks, backend, mode == "warm"))))
    composed, cpu_composed = time.perf_counter() - started, time.process_time() - cpu_started
    quiet = Console(file=io.StringIO())
    result = run_evaluation(resolved, out, console=quiet)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    result.timings["compose_seconds"] = composed
    CPU_SECONDS["compose_seconds"] = cpu_composed
    n_cases = result.summary.counts["n_cases"]
    return {
        "backend": backend,
        "n_chunks_target": n_chunks,
        "n_chunks": len_chunks(out),
        "mode": mode,
        "wall_seconds": round(wall, 2),
        "ms_per_case": round(1000 * wall / n_cases, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cpu_seconds": round(cpu, 2),
        "stages": {k: round(v, 3) for k, v in result.timings.items()},
        "cpu_stages": {k: round(v, 3) for k, v in CPU_SECONDS.items()},
        "n_cases": n_cases,
        "recall_at_5": round(result.objective, 4),
        "artifact_bytes": {p.name: p.stat().st_size for p in sorted(out.iterdir())},
        "cache_hits": {k: v for k, v in result.cache_metrics.items() if k.endswith("/hits")},
    }


def compare(work: Path, n_chunks: int, rounds: int = 3) -> dict[str, Any]:
    """The fixed code paths against the plain implementations they replaced (the reference
    functions of tests/run/test_scale_paths.py), side by side in one process on the BM25
    run of ``n_chunks`` (its cached stages): each side's best of ``rounds``, CPU seconds."""
    import numpy as np
    from tests.run.test_scale_paths import reference_score_cases, reference_tokenize

    from ragsweep.cache.stage import StageCache
    from ragsweep.config.app import compose, plain_config
    from ragsweep.data.corpus import load_corpus
    from ragsweep.data.golden import load_golden
    from ragsweep.eval.scoring import make_queries, retrieve, score_cases
    from ragsweep.index.base import scope_masker
    from ragsweep.index.tokenize import TokenizerConfig, tokenize
    from ragsweep.run.config import resolve
    from ragsweep.run.pipeline import Timer, build_index, select_cases

    resolved = resolve(plain_config(compose(overrides(work, n_chunks, "bm25", False))))
    cfg = resolved.cfg
    corpus = load_corpus(cfg.corpus)
    cases = select_cases(load_golden(cfg.golden, corpus), cfg.eval.split)
    built = build_index(resolved, corpus, StageCache(cache_dir(work, "bm25", n_chunks)), Timer())
    docs = [c.doc for c in built.chunks]
    scopes = [c.scope for c in cases if c.scope is not None]

    def masks_by_id() -> None:
        ids = np.asarray(docs, dtype=object)
        for scope in {tuple(sorted(s)) for s in scopes}:
            np.isin(ids, list(scope))

    def masks_by_code() -> None:
        mask = scope_masker(docs)
        for scope in scopes:
            mask(scope)

    queries = make_queries(cases, resolved.preprocessor, scope_masker(docs))
    ranked = retrieve(queries, built.index, resolved.preprocessor.identity, cfg.top_k)
    sample = built.texts[:100_000]
    tokenizer = TokenizerConfig()
    pairs = {
        "tokenize_100k_chunks": (
            lambda: [reference_tokenize(t, tokenizer) for t in sample],
            lambda: [tokenize(t, tokenizer) for t in sample],
        ),
        "score_cases": (
            lambda: reference_score_cases(cases, ranked, built.chunks, cfg.eval),
            lambda: score_cases(cases, ranked, built.chunks, cfg.eval),
        ),
        f"scope_masks_{len(scopes)}_scoped_cases": (masks_by_id, masks_by_code),
    }
    out: dict[str, Any] = {"n_chunks": len(built.chunks), "load_average": load_average()}
    for name, (before, after) in pairs.items():
        times: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(rounds):
            for side, run in (("before", before), ("after", after)):
                started = time.process_time()
                run()
                times[side].append(time.process_time() - started)
        best = {side: min(values) for side, values in times.items()}
        out[name] = {
            **{k: round(v, 3) for k, v in best.items()},
            "speedup": round(best["before"] / max(best["after"], 1e-9), 1),
        }
    return out


def row_blocked_search(vectors: Any, query_vectors: Any, k: int) -> list[Any]:
    """Dense search as it was before the cost curve: blocks of queries against every chunk,
    ``SCORE_BLOCK_CELLS // n_chunks`` queries per block, so every few queries re-read all
    vectors."""
    from ragsweep.index.backends.dense import SCORE_BLOCK_CELLS
    from ragsweep.index.base import top_k_rows

    rows = max(1, SCORE_BLOCK_CELLS // max(1, len(vectors)))
    picked: list[Any] = []
    for begin in range(0, len(query_vectors), rows):
        scores = query_vectors[begin : begin + rows] @ vectors.T
        picked += top_k_rows(scores, k, float("-inf"))
    return picked


def compare_dense(n_chunks: int, n_queries: int = 500, rounds: int = 2) -> dict[str, Any]:
    """Dense search of ``n_queries`` (batches of SEARCH_BATCH, as a run) over ``n_chunks``
    random 256-d vectors: the query-blocked search it replaced against ragsweep's
    DenseIndex; CPU and wall seconds, each side's best of ``rounds``; rankings compared."""
    import numpy as np

    from ragsweep.eval.scoring import SEARCH_BATCH
    from ragsweep.index.backends.dense import build_dense_index
    from ragsweep.index.base import IndexProvenance, Query
    from ragsweep.index.encoding import l2_normalize
    from scale_corpus import hashed_identity

    rng = np.random.default_rng(0)
    vectors = l2_normalize(rng.normal(size=(n_chunks, 256)))
    query_vectors = l2_normalize(rng.normal(size=(n_queries, 256)))
    identity = hashed_identity(256)

    class Table:
        def __init__(self) -> None:
            self.identity = identity
            self.rows = {f"q{i}": v for i, v in enumerate(query_vectors)}

        def embed(self, texts: Sequence[str]) -> Any:
            return np.stack([self.rows[t] for t in texts])

    index = build_dense_index(
        vectors, Table(), IndexProvenance(identity, {"steps": []}, "c", "h", n_chunks)
    )
    queries = [Query(f"q{i}") for i in range(n_queries)]

    def before() -> list[list[int]]:
        return [
            p.tolist()
            for b in range(0, n_queries, SEARCH_BATCH)
            for p in row_blocked_search(vectors, query_vectors[b : b + SEARCH_BATCH], 10)
        ]

    def after() -> list[list[int]]:
        return [
            r.indices.tolist()
            for b in range(0, n_queries, SEARCH_BATCH)
            for r in index.search(queries[b : b + SEARCH_BATCH], 10, {"steps": []})
        ]

    out: dict[str, Any] = {"n_chunks": n_chunks, "load_average": load_average()}
    same = True
    for side, run in (("before", before), ("after", after)) * rounds:
        started, cpu = time.perf_counter(), time.process_time()
        result = run()
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        out.setdefault(side, result)
        same = same and result == out[side]
        out[f"{side}_wall"] = round(min(out.get(f"{side}_wall", wall), wall), 3)
        out[f"{side}_cpu"] = round(min(out.get(f"{side}_cpu", cpu), cpu), 3)
    out["same_rankings"] = out.pop("before") == out.pop("after")
    return out


def len_chunks(run_dir: Path) -> int:
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    for line in report.splitlines():
        if "chunks" in line and any(ch.isdigit() for ch in line):
            digits = "".join(ch for ch in line.split("chunks", 1)[1] if ch.isdigit())
            if digits:
                return int(digits)
    return -1


def profile(work: Path, n_chunks: int, backend: str, mode: str) -> dict[str, Any]:
    profiler = cProfile.Profile()
    profiler.enable()
    result = measure(work, n_chunks, backend, mode)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(45)
    sys.stderr.write(text.getvalue())
    return result


# --- driver ---------------------------------------------------------------------------------


def in_subprocess(*args: str) -> dict[str, Any]:
    path = os.pathsep.join(p for p in (str(BENCH), str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "RAGSWEEP_CONF_DIR": str(CONF), "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, __file__, "_step", *args], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        raise SystemExit(f"step {args} failed:\n{out.stderr[-4000:]}")
    if args[0] == "profile":
        sys.stderr.write(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def curve(work: Path, backends: list[str], sizes: list[int] | None) -> dict[str, Any]:
    print(f"store: {in_subprocess('prime', str(work))}", flush=True)
    rows = []
    for backend in backends:
        for n in sizes or SIZES[backend]:
            print(f"generate {n}: {in_subprocess('generate', str(work), str(n))}", flush=True)
            shutil.rmtree(cache_dir(work, backend, n), ignore_errors=True)  # cold is cold
            for mode in ("cold", "warm"):
                row = in_subprocess("measure", str(work), str(n), backend, mode)
                row["load_average"] = load_average()
                rows.append(row)
                print(json.dumps(row), flush=True)
    return {"rows": rows, "exponents": exponents(rows), "table": table(rows)}


def warm_rounds(work: Path, backend: str, sizes: list[int], rounds: int) -> dict[str, Any]:
    """Warm runs of every size in turn, ``rounds`` times, each in its own process, on the
    caches a ``curve --work`` run left: on a shared machine one warm run per size is at
    the mercy of the load, alternating sizes exposes them to the same load. Per size: the
    median and range of wall ms per case, CPU seconds, CPU seconds without ``store``
    (opening MLflow, the same at every size) and peak RSS."""
    rows = []
    for round_ in range(rounds):
        for n in sizes:
            row = in_subprocess("measure", str(work), str(n), backend, "warm")
            row |= {"round": round_, "load_average": load_average()}
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {}
    for n in sizes:
        mine = [r for r in rows if r["n_chunks_target"] == n]
        figures = {
            "ms_per_case": [r["ms_per_case"] for r in mine],
            "cpu_seconds": [r["cpu_seconds"] for r in mine],
            "cpu_without_store": [cpu_without_store(r) for r in mine],
            "peak_rss_mb": [r["peak_rss_mb"] for r in mine],
            **{
                f"cpu_{stage}": [r["cpu_stages"].get(stage, 0.0) for r in mine]
                for stage in ("load_seconds", "chunk_seconds", "eval_seconds", "artifacts_seconds")
            },
        }
        summary[str(n)] = {
            name: {"median": statistics.median(v), "min": min(v), "max": max(v)}
            for name, v in figures.items()
        }
        summary[str(n)]["per_round_ratio_to_smallest"] = paired_ratios(rows, min(sizes), n)
    return {"backend": backend, "rounds": rounds, "rows": rows, "summary": summary}


def cpu_without_store(row: dict[str, Any]) -> float:
    """A run's CPU seconds without ``store`` (importing and opening MLflow)."""
    return round(row["cpu_seconds"] - row["cpu_stages"].get("store_seconds", 0.0), 3)


def paired_ratios(rows: list[dict[str, Any]], smallest: int, n: int) -> dict[str, Any]:
    """Per round, size ``n``'s wall ms per case and CPU without ``store`` over the smallest
    size's of the same round (run back to back, so under the same load), and their
    medians: the figure the warm target is read from (not slower: at most 1)."""
    by_round: dict[int, dict[int, dict[str, Any]]] = {}
    for row in rows:
        by_round.setdefault(row["round"], {})[row["n_chunks_target"]] = row
    pairs = [(sizes[smallest], sizes[n]) for sizes in by_round.values()]
    wall = [round(big["ms_per_case"] / small["ms_per_case"], 3) for small, big in pairs]
    cpu = [round(cpu_without_store(big) / cpu_without_store(small), 3) for small, big in pairs]
    return {
        "ms_per_case": wall,
        "ms_per_case_median": statistics.median(wall),
        "cpu_without_store": cpu,
        "cpu_without_store_median": statistics.median(cpu),
    }


def exponents(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``b`` of ``time ∝ n^b`` between consecutive sizes, per backend, mode and stage (and
    for wall time and peak RSS)."""
    out = []
    keyed: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        keyed.setdefault((row["backend"], row["mode"]), []).append(row)
    for (backend, mode), series in keyed.items():
        series.sort(key=lambda r: r["n_chunks"])
        for a, b in itertools.pairwise(series):
            ratio = math.log(b["n_chunks"] / a["n_chunks"])
            figures = {
                name: _exponent(a["stages"].get(name), b["stages"].get(name), ratio)
                for name in STAGES
            }
            figures |= {
                f"cpu_{name}": _exponent(
                    a["cpu_stages"].get(name), b["cpu_stages"].get(name), ratio
                )
                for name in STAGES
            }
            figures["wall"] = _exponent(a["wall_seconds"], b["wall_seconds"], ratio)
            figures["cpu"] = _exponent(a["cpu_seconds"], b["cpu_seconds"], ratio)
            figures["peak_rss"] = _exponent(a["peak_rss_mb"], b["peak_rss_mb"], ratio)
            out.append(
                {
                    "backend": backend,
                    "mode": mode,
                    "from": a["n_chunks"],
                    "to": b["n_chunks"],
                    **figures,
                }
            )
    return out


def _exponent(a: float | None, b: float | None, log_ratio: float) -> float | None:
    if not a or not b or a < 0.02 or b < 0.02:  # too short to fit an exponent to
        return None
    return round(math.log(b / a) / log_ratio, 2)


def table(rows: list[dict[str, Any]], cpu: bool = False) -> str:
    """Markdown, one row per run: seconds per stage (CPU seconds with ``cpu``, where the
    logging time is not measured), the whole run, per case, peak RSS, recall@5, load."""
    names = [s for s in STAGES if not (cpu and s == "log_seconds")]
    whole = "CPU s" if cpu else "wall s"
    header = ["backend", "chunks", "mode", *(s.removesuffix("_seconds") for s in names), whole]
    header += ["ms/case (wall)", "peak RSS MB", "recall@5", "load avg"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        stages = r["cpu_stages"] if cpu else r["stages"]
        cells = [r["backend"], f"{r['n_chunks']:,}", r["mode"]]
        cells += [f"{stages[s]:.2f}" if s in stages else "–" for s in names]
        cells += [f"{r['cpu_seconds' if cpu else 'wall_seconds']:.1f}", f"{r['ms_per_case']:.1f}"]
        cells += [f"{r['peak_rss_mb']:.0f}", f"{r['recall_at_5']:.3f}", r["load_average"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def artifact_table(rows: list[dict[str, Any]]) -> str:
    """Markdown rows: bytes of each run directory's files, warm BM25 runs."""
    lines = []
    for r in rows:
        if r["backend"] != "bm25" or r["mode"] != "warm":
            continue
        sizes = r["artifact_bytes"]
        rest = sum(v for k, v in sizes.items() if k not in ("chunks.jsonl", "cases.jsonl"))
        cells = [f"{r['n_chunks']:,}", _mb(sizes["chunks.jsonl"]), _mb(sizes["cases.jsonl"])]
        cells += [f"{rest / 1e3:.0f} KB", _mb(sum(sizes.values()))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _mb(size: int) -> str:
    return f"{size / 1e6:.2f} MB"


def exponent_table(exps: list[dict[str, Any]], prefix: str = "cpu_") -> str:
    """Markdown: the fitted ``b`` per stage between consecutive sizes (CPU seconds by
    default; ``prefix=""`` for wall seconds), blank where a stage took under 0.02 s."""
    names = [s for s in STAGES if s != "log_seconds" or not prefix]
    header = ["backend", "mode", "sizes", *(n.removesuffix("_seconds") for n in names)]
    header += ["whole run", "peak RSS"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for e in exps:
        cells = [e["backend"], e["mode"], f"{e['from'] // 1000}k→{e['to'] // 1000}k"]
        cells += [_cell(e.get(prefix + n)) for n in names]
        cells += [_cell(e["cpu" if prefix else "wall"]), _cell(e["peak_rss"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def render(stamp: str | None) -> None:
    """Print the tables of a stored curve (the latest, or the one started at ``stamp``)."""
    stored = json.loads(RESULTS.read_text())
    curves = sorted(k for k, v in stored.items() if "rows" in v)  # not the warm rounds
    results = stored[stamp or curves[-1]]
    rows = results["rows"]
    print("CPU seconds\n" + table(rows, cpu=True), "\n")
    print("Wall seconds\n" + table(rows), "\n")
    exps = exponents(rows)
    print("Exponents, CPU\n" + exponent_table(exps), "\n")
    print("Exponents, wall\n" + exponent_table(exps, prefix=""), "\n")
    print("Artifacts\n" + artifact_table(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["curve", "warm", "profile", "compare", "render", "_step"])
    parser.add_argument("args", nargs="*")
    parser.add_argument("--backend", action="append", choices=sorted(SIZES))
    parser.add_argument("--sizes", type=int, nargs="*")
    parser.add_argument("--size", type=int, default=300_000)
    parser.add_argument("--mode", choices=["cold", "warm"], default="warm")
    parser.add_argument("--rounds", type=int, default=5, help="warm: rounds over the sizes")
    parser.add_argument("--work", type=Path, help="keep corpora, caches and runs here")
    options = parser.parse_args()
    if options.what == "_step":
        kind, work, *rest = options.args
        steps = {
            "generate": lambda: generate(Path(work), int(rest[0])),
            "prime": lambda: prime_store(Path(work)),
            "measure": lambda: measure(Path(work), int(rest[0]), rest[1], rest[2]),
            "profile": lambda: profile(Path(work), int(rest[0]), rest[1], rest[2]),
            "compare": lambda: compare(Path(work), int(rest[0])),
            "compare_dense": lambda: compare_dense(int(rest[0])),
        }
        print(json.dumps(steps[kind]()))
        return
    if options.what == "render":
        render(options.args[0] if options.args else None)
        return
    if options.what == "warm":  # the caches of an earlier `curve --work DIR`
        if options.work is None or not options.sizes:
            raise SystemExit("warm needs --work (of an earlier curve) and --sizes")
        backend = (options.backend or ["bm25"])[0]
        results = warm_rounds(options.work, backend, options.sizes, options.rounds)
        print(json.dumps(results["summary"], indent=1))
        store_results({f"warm-{backend}": results})
        return
    with tempfile.TemporaryDirectory() as temporary:
        work = options.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        if options.what == "compare":
            if options.backend == ["hashed_bow"]:
                for n in options.sizes or [options.size]:
                    print(json.dumps(in_subprocess("compare_dense", str(work), str(n))))
                return
            for n in options.sizes or [options.size]:
                in_subprocess("generate", str(work), str(n))
                print(json.dumps(in_subprocess("compare", str(work), str(n))), flush=True)
            return
        if options.what == "profile":
            backend = (options.backend or ["bm25"])[0]
            in_subprocess("generate", str(work), str(options.size))
            if options.mode == "warm":
                in_subprocess("prime", str(work))
                in_subprocess("measure", str(work), str(options.size), backend, "cold")
            print(
                json.dumps(
                    in_subprocess("profile", str(work), str(options.size), backend, options.mode)
                )
            )
            return
        results = curve(work, options.backend or list(SIZES), options.sizes)
    print(results["table"])
    print(json.dumps(results["exponents"], indent=1))
    store_results(results)


def store_results(results: dict[str, Any]) -> None:
    """Add ``results`` to outputs/bench/scale.json under the current UTC time."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    previous[time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())] = results
    RESULTS.write_text(json.dumps(previous, indent=1))


if __name__ == "__main__":
    main()
