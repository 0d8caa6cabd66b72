"""ragsweep against context-grid 0.9.5 on the demo's 4-config BM25 grid, side by side (issue 31).

    python bench/bench_peer.py [--repeat 5] [--ragsweep-src PATH] [--contextgrid PATH]

The grid: fixed-size chunks at sizes 400/800 x overlap 0/100, BM25, the tuning split of the
bundled demo (``ragsweep/_data/demo``). Every row is a whole process, timed wall to wall:

- ragsweep: ``ragsweep -m chunking.size=400,800 chunking.overlap=0,100`` (the console script
  beside this interpreter; ``--ragsweep-src`` puts another checkout's ``src`` first on
  ``PYTHONPATH``), warm with MLflow on (a SQLite store in its folder), warm with
  ``tracking=off``, and cold with ``tracking=off`` (the stage cache ``outputs/cache`` removed
  before each timed run).
- context-grid, from its own venv (``--contextgrid``; never a dependency of ragsweep):
  ``contextgrid run contextgrid.yaml`` with the config written here and printed at the start:
  parser ``markdown`` (keeps the file text as is, as ragsweep does), chunkers
  ``fixed:SIZE,overlap=OVERLAP,tokenizer=character``, no embedder, index ``bm25``, factorial
  mode, ``run.resolution_policy: containment`` (a chunk is relevant when it holds an evidence
  passage whole, ragsweep's ``eval.min_span_overlap: 1.0``) and ``run.cache: disk``; warm (its
  cache filled by the untimed run) and cold (its cache folder removed before each timed run).
  ``contextgrid sweep`` is not used: it always builds an embedder (``--embedder`` has no
  "none": ``--embedder none`` exits 1 in under a second), keeps its cache in memory only and cannot
  set the resolution policy.

Characters, not tokens: context-grid's ``fixed`` chunker counts ``tokenizer`` tokens, and with
``character`` one token is one character, which is what ragsweep's ``chunking.size`` counts by
default. Its default tokenizer (``regex``: words and punctuation) makes 400 about 2,000
characters.

Inputs, in a temporary folder: the corpus folder copied as it is (both tools name a document by
its path inside the folder); the golden set's tuning cases as context-grid JSONL items (id,
question, ``qtype`` from ``type``, one anchor per evidence quote: ``source_id`` from ``doc``,
``occurrence`` 0-based where ragsweep's is 1-based; an unanswerable case has no anchors).

Timing as in bench_startup.py: one untimed run per row, then ``--repeat`` rounds in which every
row runs once, the two tools' rows interleaved and the order reversed every other round, so load
from other processes falls on all rows alike; medians and ranges are reported, with the load
average before and after. Bytecode: by default both tools run with ``PYTHONDONTWRITEBYTECODE``
unset and ``PYTHONPYCACHEPREFIX`` in the temporary folder, so after the untimed run both start
from compiled bytecode, as an installed tool does. ``--bytecode env`` keeps the environment as
it is (where ``PYTHONDONTWRITEBYTECODE=1`` is set and the source tree has no ``__pycache__``,
ragsweep then compiles its own modules in every process while context-grid reads the ``.pyc``
files pip wrote).

Both tools must really do the work: every process must exit 0 and print its grid of 4;
context-grid's warm runs must report every cache lookup reused and its cold runs no chunk
reused; ragsweep's cold runs must rebuild the stage cache; the MLflow store must hold a run per
configuration of every MLflow sweep. Each tool's headline per configuration is printed from the
files the untimed runs wrote, with the one measure both define alike (hit@5), and notes on what
they compute differently.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
RAGSWEEP = Path(sys.executable).parent / "ragsweep"  # the console script
CONTEXTGRID = Path("/tmp/cg/bin/contextgrid")
SIZES, OVERLAPS = (400, 800), (0, 100)
GRID = ["-m", "chunking.size=400,800", "chunking.overlap=0,100"]
TRACKING_OFF = "tracking=off"
SPLIT = "tuning"
STAGE_CACHE = Path("outputs/cache")  # ragsweep's cache.dir in a folder with no project config
MLFLOW_DB = Path("outputs/mlflow.db")  # tracking.default_db
CG_CACHE = ".contextgrid-cache"  # under report.out (contextgrid.config.loader.build_cache)
CG_CHUNKER = re.compile(r"fixed:(\d+),overlap=(\d+)")

Check = Callable[[subprocess.CompletedProcess[str]], str | None]


@dataclass(frozen=True)
class Row:
    """One timed process: its command, the folder it runs in, and what it must show."""

    name: str
    tool: str
    command: list[str]
    folder: Path
    env: dict[str, str]
    check: Check  # every run
    state: Check | None = None  # timed runs: the cache state the row's name claims
    cold_cache: Path | None = None  # removed before every timed run


def demo_dir(src: Path | None) -> Path:
    return ((src or REPO / "src") / "ragsweep" / "_data" / "demo").resolve()


def contextgrid_item(case: dict[str, Any]) -> dict[str, Any]:
    """One golden case as a context-grid eval item (module docstring, "Inputs")."""
    anchors = []
    for evidence in case.get("evidence", []):
        if "quote" not in evidence:
            raise SystemExit(f"{case['id']}: only quoted evidence is converted: {evidence}")
        anchors.append(
            {
                "source_id": evidence["doc"],
                "quote": evidence["quote"],
                "occurrence": evidence.get("occurrence", 1) - 1,
            }
        )
    return {
        "id": case["id"],
        "question": case["question"],
        "qtype": case["type"],
        "anchors": anchors,
    }


def tuning_cases(demo: Path) -> list[dict[str, Any]]:
    lines = (demo / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    cases = [json.loads(line) for line in lines if line.strip()]
    if any("split" not in case for case in cases):
        raise SystemExit("a demo case has no split: this converter reads the split as written")
    return [case for case in cases if case["split"] == SPLIT]


def write_contextgrid_inputs(demo: Path, inputs: Path) -> tuple[Path, Path]:
    """The corpus folder and the JSONL eval set context-grid reads."""
    corpus = inputs / "corpus"
    shutil.copytree(demo / "corpus", corpus)
    evalset = inputs / "evalset.jsonl"
    items = [json.dumps(contextgrid_item(c), ensure_ascii=False) for c in tuning_cases(demo)]
    evalset.write_text("\n".join(items) + "\n", encoding="utf-8")
    return corpus, evalset


def contextgrid_config(corpus: Path, evalset: Path, out: Path) -> str:
    chunkers = ", ".join(
        f'"fixed:{size},overlap={overlap},tokenizer=character"'
        for size in SIZES
        for overlap in OVERLAPS
    )
    return f"""name: demo-bm25-grid
corpus: {corpus}
evalset: {evalset}
grid:
  parser: [markdown]
  chunker: [{chunkers}]
  embedder: [null]
  index: [bm25]
run:
  mode: factorial
  headline: recall@5
  resolution_policy: containment
  cache: disk
report:
  out: {out}
"""


def child_env(tool: str, src: Path | None, bytecode: str, pycache: Path) -> dict[str, str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": ""}  # ragsweep: the store in its folder
    if tool == "context-grid":
        env.pop("PYTHONPATH", None)
    elif src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    if bytecode == "cache":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def prints(text: str) -> Check:
    def check(done: subprocess.CompletedProcess[str]) -> str | None:
        return None if text in done.stdout else f"{text!r} not in its output"

    return check


def both(*checks: Check) -> Check:
    def check(done: subprocess.CompletedProcess[str]) -> str | None:
        return next((p for c in checks if (p := c(done)) is not None), None)

    return check


def rebuilt(cache: Path) -> Check:
    def check(done: subprocess.CompletedProcess[str]) -> str | None:
        return None if cache.is_dir() else f"no stage cache at {cache} after a run"

    return check


def contextgrid_rows(
    contextgrid: Path, corpus: Path, evalset: Path, work: Path, env: dict[str, str]
) -> list[Row]:
    rows = []
    for name, needs in (("warm", "(100%)"), ("cold", "chunk 0/")):
        folder = work / f"contextgrid-{name}"
        folder.mkdir()
        out = folder / "results"
        (folder / "contextgrid.yaml").write_text(contextgrid_config(corpus, evalset, out))
        rows.append(
            Row(
                name=f"context-grid, {name}",
                tool="context-grid",
                command=[str(contextgrid), "run", "contextgrid.yaml"],
                folder=folder,
                env=env,
                check=prints("4 to run"),
                state=prints(needs),
                cold_cache=out / CG_CACHE if name == "cold" else None,
            )
        )
    return rows


def ragsweep_rows(ragsweep: Path, work: Path, env: dict[str, str]) -> list[Row]:
    shown = prints("grid of 4 configuration(s)")
    specs: tuple[tuple[str, str, list[str], bool], ...] = (
        ("ragsweep, warm, MLflow on", "ragsweep-mlflow", [], False),
        ("ragsweep, warm, tracking=off", "ragsweep-off", [TRACKING_OFF], False),
        ("ragsweep, cold, tracking=off", "ragsweep-cold", [TRACKING_OFF], True),
    )
    rows = []
    for name, folder_name, extra, cold in specs:
        folder = work / folder_name
        folder.mkdir()
        cache = folder / STAGE_CACHE
        rows.append(
            Row(
                name=name,
                tool="ragsweep",
                command=[str(ragsweep), *GRID, *extra],
                folder=folder,
                env=env,
                check=shown,
                state=rebuilt(cache) if cold else None,
                cold_cache=cache if cold else None,
            )
        )
    return rows


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(row: Row, untimed: bool = False) -> tuple[float, float]:
    """Wall seconds of one process of ``row``, which must pass its checks (its ``state``
    only when timed: the untimed run fills the caches), and the CPU seconds of it and the
    processes it waited for (on a loaded machine CPU time moves less than wall time)."""
    if row.cold_cache is not None and not untimed:
        shutil.rmtree(row.cold_cache, ignore_errors=True)
    started, cpu = time.perf_counter(), cpu_of_children()
    done = subprocess.run(
        row.command, cwd=row.folder, env=row.env, capture_output=True, text=True, check=False
    )
    seconds, cpu = time.perf_counter() - started, cpu_of_children() - cpu
    checks = [row.check] if untimed or row.state is None else [row.check, row.state]
    problem = f"exit status {done.returncode}" if done.returncode else both(*checks)(done)
    if problem is not None:
        output = f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        raise SystemExit(
            f"{row.name} ({' '.join(row.command)}) in {row.folder}: {problem}\n{output}"
        )
    return seconds, cpu


def rounds(rows: list[Row], repeat: int) -> dict[str, list[tuple[float, float]]]:
    """One untimed run per row, then ``repeat`` rounds, every other one in reverse order."""
    for row in rows:
        timed(row, untimed=True)
        if row.cold_cache is not None and not row.cold_cache.is_dir():
            raise SystemExit(f"{row.name}: no cache at {row.cold_cache} to remove")
    times: dict[str, list[tuple[float, float]]] = {row.name: [] for row in rows}
    for number in range(repeat):
        for row in rows if number % 2 == 0 else reversed(rows):
            times[row.name].append(timed(row))
    return times


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def ragsweep_scores(folder: Path) -> dict[tuple[int, int], dict[str, float]]:
    """Per configuration of the newest sweep in ``folder``: recall_at_5 (its headline),
    hit_at_5 and the cases both are averaged over, from each job's run files."""
    sweep = sorted((folder / "outputs" / "multirun").glob("*/*"))[-1]
    scores = {}
    for job in sorted(p for p in sweep.iterdir() if p.name.isdigit()):
        chunking = yaml.safe_load((job / "config.yaml").read_text(encoding="utf-8"))["chunking"]
        lines = (job / "cases.jsonl").read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines]
        cases = [row["metrics"] for row in rows if row["answerable"]]
        scores[chunking["size"], chunking["overlap"]] = {
            "recall_at_5": mean([c["recall_at_5"] for c in cases]),
            "hit_at_5": mean([c["hit_at_5"] for c in cases]),
            "n": len(cases),
        }
    return scores


def contextgrid_scores(folder: Path) -> dict[tuple[int, int], dict[str, float]]:
    """Per configuration: recall@5 (its headline), hit_rate@5 and the questions it scored."""
    results = json.loads((folder / "results" / "results.json").read_text(encoding="utf-8"))
    scores = {}
    for run in results["runs"]:
        found = CG_CHUNKER.match(run["config"]["chunker"])
        assert found is not None, run["config"]["chunker"]
        scores[int(found[1]), int(found[2])] = {
            "recall@5": run["metrics"]["recall@5"],
            "hit_rate@5": run["metrics"]["hit_rate@5"],
            "n": run["scored_queries"],
        }
    return scores


def mlflow_runs(folder: Path) -> int:
    with sqlite3.connect(folder / MLFLOW_DB) as store:
        return int(store.execute("SELECT count(*) FROM runs").fetchone()[0])


def score_table(rows: list[Row], answerable: int) -> list[str]:
    folders = {row.name: row.folder for row in rows}
    ours = ragsweep_scores(folders["ragsweep, warm, tracking=off"])
    theirs = contextgrid_scores(folders["context-grid, warm"])
    lines = [
        "| chunking | ragsweep recall_at_5 (headline) | ragsweep hit_at_5 | cases | "
        "context-grid recall@5 (headline) | context-grid hit_rate@5 | questions scored | "
        "context-grid hit_rate@5, unscored as misses |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in SIZES:
        for overlap in OVERLAPS:
            o, t = ours[size, overlap], theirs[size, overlap]
            lines.append(
                f"| {size}/{overlap} | {o['recall_at_5']:.4f} | {o['hit_at_5']:.4f} | {o['n']} | "
                f"{t['recall@5']:.4f} | {t['hit_rate@5']:.4f} | {t['n']} | "
                f"{t['hit_rate@5'] * t['n'] / answerable:.4f} |"
            )
    return lines


AGAINST = {
    "ragsweep, warm, MLflow on": "context-grid, warm",
    "ragsweep, warm, tracking=off": "context-grid, warm",
    "ragsweep, cold, tracking=off": "context-grid, cold",
}


def time_table(times: dict[str, list[tuple[float, float]]]) -> list[str]:
    """Median wall (with its range) and median CPU per row; ragsweep's over context-grid's."""
    wall = {name: [t[0] for t in runs] for name, runs in times.items()}
    cpu = {name: statistics.median(t[1] for t in runs) for name, runs in times.items()}
    median = {name: statistics.median(w) for name, w in wall.items()}
    lines = [
        "| what | median wall | range | ragsweep / context-grid (wall) | median CPU | (CPU) |",
        "|---|---|---|---|---|---|",
    ]
    for name, w in wall.items():
        other = AGAINST.get(name)
        ratios = [f"{m[name] / m[other]:.2f}x" if other else "-" for m in (median, cpu)]
        lines.append(
            f"| {name} | {median[name]:.2f} s | {min(w):.2f}-{max(w):.2f} s | {ratios[0]} | "
            f"{cpu[name]:.2f} s | {ratios[1]} |"
        )
    return lines


def notes(cases: list[dict[str, Any]]) -> list[str]:
    scoped = sum("scope" in case for case in cases)
    return [
        "- hit@5 is defined alike (a top-5 chunk holds an evidence passage whole), but "
        "context-grid averages it only over the questions for which some chunk of the "
        "configuration holds an evidence passage whole ('questions scored'); the last column "
        "counts the others as misses, as ragsweep does.",
        "- recall@5 is not: ragsweep's is the fraction of a case's evidence passages held by a "
        "top-5 chunk; context-grid's the fraction of the chunks holding evidence that are in "
        "the top 5.",
        "- Chunks: the same at overlap 0; at overlap 100 both step size-100 characters, but "
        "context-grid carries the overlap backwards, so its chunks are size+100 characters long "
        "(0-800, 600-1499, ...) where ragsweep's are size long (0-800, 700-1500, ...).",
        "- BM25: both k1 1.5, b 0.75, lowercased; ragsweep's is bm25s (Lucene) over a CJK-aware "
        "tokenizer (bigrams), context-grid's Okapi over \\w+ words (a run of Japanese is one "
        "word).",
        f"- ragsweep restricts {scoped} tuning case(s) to their `scope` of documents; "
        "context-grid has no such field and ranks them over the whole corpus.",
        "- Computed besides, per configuration. ragsweep: hit, recall, nDCG and coverage at "
        "1/3/5/10, MRR, and the same at 1000/2000/4000-character budgets, every one with a 95% "
        "bootstrap interval (1000 resamples within question type); writes cases.jsonl, the "
        "case table, chunks.jsonl, report.md and a chart per job and the sweep summary (and "
        "logs 4 MLflow runs with MLflow on). context-grid: hit_rate, map, mrr, ndcg, precision "
        "and recall at 1/3/5/10/20, a bootstrap interval on its headline only, the headline by "
        "question type, a failure taxonomy and a paired test of the best two; writes "
        "report.md, results.json, manifest.json and experiment.yaml.",
    ]


def loads(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{value:.2f}" for value in load)


def describe(rows: list[Row], work: Path) -> None:
    for row in rows:
        print(f"{row.name}: (cd {row.folder} && {' '.join(row.command)})")
    config = work / "contextgrid-warm" / "contextgrid.yaml"
    print(f"\n{config} (the cold row's differs only in report.out):\n")
    print(config.read_text(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--ragsweep-src", type=Path, help="another checkout's src/ folder")
    parser.add_argument("--ragsweep", type=Path, default=RAGSWEEP, help="its console script")
    parser.add_argument("--contextgrid", type=Path, default=CONTEXTGRID)
    parser.add_argument("--bytecode", choices=["cache", "env"], default="cache")
    parser.add_argument("--out", type=Path, default=REPO / "outputs/bench/peer.json")
    args = parser.parse_args()
    src = args.ragsweep_src.resolve() if args.ragsweep_src else None
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-peer-") as tmp:
        work = Path(tmp)
        corpus, evalset = write_contextgrid_inputs(demo_dir(src), work)
        pycache = work / "pycache"
        cg_env = child_env("context-grid", src, args.bytecode, pycache)
        rs_env = child_env("ragsweep", src, args.bytecode, pycache)
        cg = contextgrid_rows(args.contextgrid, corpus, evalset, work, cg_env)
        rs = ragsweep_rows(args.ragsweep, work, rs_env)
        rows = [cg[0], rs[0], rs[1], cg[1], rs[2]]  # the two tools interleaved
        describe(rows, work)
        times = rounds(rows, args.repeat)
        runs = mlflow_runs(rs[0].folder)
        if runs < 4 * (args.repeat + 1):
            raise SystemExit(f"the MLflow store holds {runs} runs, not 4 per sweep")
        cases = tuning_cases(demo_dir(src))
        answerable = sum(bool(case.get("evidence")) for case in cases)
        scores = score_table(rows, answerable)
    load_after = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"times": times, "load": [load_before, load_after]}) + "\n")
    print(f"ragsweep src: {src or 'the installed one'}; bytecode: {args.bytecode}; ", end="")
    print(f"rounds: {args.repeat}; MLflow runs in the store after {args.repeat + 1} sweeps: {runs}")
    print(f"load average (1/5/15 min) before {loads(load_before)}, after {loads(load_after)}")
    print("\n".join(["", *time_table(times), "", *scores, "", *notes(cases)]))


if __name__ == "__main__":
    main()
