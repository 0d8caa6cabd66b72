"""What MLflow tracking costs a run, measured side by side (see bench/README.md).

    python bench/bench_tracking.py            # all three, figures as JSON + a table
    python bench/bench_tracking.py single     # warm demo run, tracking on vs off
    python bench/bench_tracking.py sweep      # 4- and 14-job sweeps: logger, in-process, off
    python bench/bench_tracking.py artifacts  # bytes one SQuAD run uploads, per file

Every timed run is a fresh ``ragsweep`` process (its wall time, start-up included), on a
warm stage cache and an existing SQLite store: one untimed run of each kind first creates
both. The sides alternate, ``REPEATS`` times each, and each side's median is taken, so
load from other processes on the machine falls on all of them. ``single`` runs the default
config the way a user at a terminal gets it (its standard output is a pseudo-terminal, so
``tracking.background=auto`` logs in the background), with ``tracking.background=never``
(what a script that pipes the output gets: logged in-process) and with ``tracking=off``;
after each background run it waits, untimed, until the run has landed in the store.
``sweep`` alternates a 4-job and a 14-job sweep (each with the sweep's logger, logged
in-process and off), so the per-further-run figure is a difference of sizes in which the
fixed cost of tracking cancels.
``artifacts`` needs the imported SQuAD data (``make import-squad``). Results go to
``outputs/bench/tracking.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RAGSWEEP = Path(sys.executable).with_name("ragsweep")
SQUAD = REPO / "outputs" / "squad"
RESULTS = REPO / "outputs" / "bench" / "tracking.json"
REPEATS = 5
SMALL_SIZES = (400, 800)  # x 2 preprocessings: 4 jobs
BIG_SIZES = (300, 400, 500, 600, 700, 800, 900)  # x 2 preprocessings: 14 jobs
SMALL_JOBS = 2 * len(SMALL_SIZES)
BIG_JOBS = 2 * len(BIG_SIZES)
SINGLE = {"on": (), "foreground": ("tracking.background=never",), "off": ("tracking=off",)}
"""``on``: the default config at a terminal (logged in the background)."""
LAND_SECONDS = 600.0


def ragsweep(work: Path, *args: str, terminal: bool = False) -> float:
    """Wall seconds of one ``ragsweep`` process writing under ``work``; ``terminal``: its
    standard output is a pseudo-terminal, as when a user runs it (stderr is captured)."""
    command = [str(RAGSWEEP), *args, f"paths.output_dir={work / 'outputs'}"]
    env = {**os.environ, "MLFLOW_TRACKING_URI": ""}
    started = time.perf_counter()
    if terminal:
        returncode, stderr = _at_terminal(command, work, env)
    else:
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, env=env)
        returncode, stderr = done.returncode, done.stderr
    seconds = time.perf_counter() - started
    if returncode != 0:
        raise SystemExit(f"ragsweep {' '.join(args)} failed:\n{stderr[-3000:]}")
    return seconds


def _at_terminal(command: list[str], work: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``command`` with its stdout on a pseudo-terminal (drained by a thread, so a full
    terminal buffer never blocks it); return its exit status and stderr."""
    controller, terminal = pty.openpty()

    def drain() -> None:
        try:
            while os.read(controller, 65536):
                pass
        except OSError:  # the terminal closed with its last writer
            return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        done = subprocess.run(
            command, cwd=work, stdout=terminal, stderr=subprocess.PIPE, text=True, env=env
        )
    finally:
        os.close(terminal)
        reader.join(timeout=5)
        os.close(controller)
    return done.returncode, done.stderr


def wait_until_landed(work: Path) -> float:
    """Seconds until the store's background logs have all landed (no pending marker left),
    then check with ``ragsweep-log --wait`` that the newest run is logged completely."""
    started = time.perf_counter()
    pending = work / "outputs" / "mlflow.db.pending"
    while any(pending.glob("*.json")):
        if time.perf_counter() - started > LAND_SECONDS:
            raise SystemExit(f"background logs in {pending} did not land")
        time.sleep(0.05)
    landed = time.perf_counter() - started
    newest = max((work / "outputs" / "runs").glob("*/*"), key=lambda p: p.stat().st_mtime)
    done = subprocess.run(
        [str(RAGSWEEP.with_name("ragsweep-log")), "--wait", str(newest)],
        capture_output=True,
        text=True,
        env={**os.environ, "MLFLOW_TRACKING_URI": ""},
    )
    if done.returncode != 0:
        raise SystemExit(f"the background log of {newest} failed:\n{done.stderr[-3000:]}")
    return landed


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished, waited-for children so far:
    the difference around one ``ragsweep`` process is its CPU time (its own children's
    included), which load from other processes on the machine barely changes (it still
    inflates wall times severalfold at a load average of 5 on 2 cores). A background
    logger is not waited for, so it is not counted."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def alternating(work: Path, kinds: dict[str, tuple[str, ...]], terminal: bool) -> dict[str, Any]:
    """Wall seconds of each kind of ``ragsweep`` command (name → its arguments), the kinds
    alternating ``REPEATS`` times; ``terminal``: at a pseudo-terminal, where kind ``on``
    logs in the background and is followed, untimed, by :func:`wait_until_landed`."""
    for name, args in kinds.items():  # untimed: fills the cache, creates the store
        ragsweep(work, *args, terminal=terminal)
        if terminal and name == "on":
            wait_until_landed(work)
    walls: dict[str, list[float]] = {name: [] for name in kinds}
    cpus: dict[str, list[float]] = {name: [] for name in kinds}
    landed: list[float] = []
    for _ in range(REPEATS):
        for name, args in kinds.items():
            cpu_before = children_cpu()
            walls[name].append(round(ragsweep(work, *args, terminal=terminal), 3))
            cpus[name].append(round(children_cpu() - cpu_before, 3))
            if terminal and name == "on":
                landed.append(round(wait_until_landed(work), 3))
    figures: dict[str, Any] = {"walls": walls, "cpu": cpus}
    figures.update({f"median_{n}": round(statistics.median(w), 3) for n, w in walls.items()})
    figures.update({f"cpu_median_{n}": round(statistics.median(c), 3) for n, c in cpus.items()})
    if landed:
        figures["landed_after_exit"] = landed
    return figures


def measure_single() -> dict[str, Any]:
    """One warm demo run per process, at a pseudo-terminal: what tracking adds to a single
    process as a user gets it (logged in the background) and in-process
    (``tracking.background=never``)."""
    with tempfile.TemporaryDirectory() as work:
        figures = alternating(Path(work), SINGLE, terminal=True)
    figures["added"] = round(figures["median_on"] - figures["median_off"], 3)
    figures["added_foreground"] = round(figures["median_foreground"] - figures["median_off"], 3)
    return figures


def grid_file(work: Path, sizes: tuple[int, ...]) -> Path:
    """A one-axis grid sweep file under ``work``: chunk ``sizes`` × two preprocessings on
    the demo data, ``2 * len(sizes)`` jobs (written by the bench, not shipped)."""
    path = work / f"grid_{len(sizes) * 2}.yaml"
    sizes_text = ", ".join(str(size) for size in sizes)
    path.write_text(
        "description: bench_tracking grid (chunk size x preprocessing) on the demo data.\n"
        "axes:\n"
        f"  - chunking.size: [{sizes_text}]\n"
        "    preprocess: [none, nfkc]\n"
        "objective: recall_at_5\n",
        encoding="utf-8",
    )
    return path


SWEEP_MODES = {"on": (), "in_process": ("tracking.background=never",), "off": ("tracking=off",)}
"""``on``: the default (the jobs' runs go to the sweep's logger process); ``in_process``:
every job logs in the sweep's process; ``off``: no tracking."""


def measure_sweep() -> dict[str, Any]:
    """Warm sweeps in one process each, a small one of ``SMALL_JOBS`` and a big one of
    ``BIG_JOBS`` jobs (the same grid, more chunk sizes), each in the three
    :data:`SWEEP_MODES`, the six alternating. What a mode adds to the big sweep minus what
    it adds to the small one, over the ``BIG_JOBS - SMALL_JOBS`` further runs, is the cost
    of each further run inside a sweep: the fixed cost (importing MLflow, opening the
    store, the parent run, starting the logger) cancels, the sweep's own per-job tracking
    work (descriptions, reading the children) is counted. The same figure is computed for
    each repeat (from that repeat's walls), so its spread shows beside the median. CPU
    counts the logger's too (the sweep waits for it)."""
    work = Path(tempfile.mkdtemp(prefix="ragsweep-bench-"))
    grids = {
        "small": ("-m", f"sweep={grid_file(work, SMALL_SIZES)}"),
        "big": ("-m", f"sweep={grid_file(work, BIG_SIZES)}"),
    }
    kinds = {
        f"{size}_{mode}": (*grid, *extra)
        for size, grid in grids.items()
        for mode, extra in SWEEP_MODES.items()
    }
    try:
        figures = alternating(work, kinds, terminal=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures["jobs"] = {"small": SMALL_JOBS, "big": BIG_JOBS}
    figures.update(per_further_run(figures, "on", ""))
    figures.update(per_further_run(figures, "in_process", "in_process_"))
    figures["median_on"] = figures["median_big_on"]
    figures["median_off"] = figures["median_big_off"]
    figures["off_per_further_run"] = round(
        (figures["median_big_off"] - figures["median_small_off"]) / (BIG_JOBS - SMALL_JOBS), 3
    )
    return figures


def per_further_run(figures: dict[str, Any], mode: str, prefix: str) -> dict[str, Any]:
    """What ``mode`` adds per further sweep run, wall and CPU: from the medians of each
    kind, and per repeat (its median and range); keys start with ``prefix``."""
    further = BIG_JOBS - SMALL_JOBS
    out: dict[str, Any] = {}
    for measure, label in (("walls", ""), ("cpu", "cpu_")):
        runs = figures[measure]
        by_repeat = [
            round(((bon - boff) - (son - soff)) / further, 3)
            for son, soff, bon, boff in zip(
                runs[f"small_{mode}"],
                runs["small_off"],
                runs[f"big_{mode}"],
                runs["big_off"],
                strict=True,
            )
        ]
        median = "median" if measure == "walls" else "cpu_median"
        added_small = figures[f"{median}_small_{mode}"] - figures[f"{median}_small_off"]
        added_big = figures[f"{median}_big_{mode}"] - figures[f"{median}_big_off"]
        out.update(
            {
                f"{prefix}{label}added": round(added_big, 3),
                f"{prefix}{label}added_small": round(added_small, 3),
                f"{prefix}{label}added_per_further_run": round(
                    (added_big - added_small) / further, 3
                ),
                f"{prefix}{label}per_further_run_by_repeat": by_repeat,
                f"{prefix}{label}per_further_run_median_of_repeats": round(
                    statistics.median(by_repeat), 3
                ),
                f"{prefix}{label}per_further_run_range": [min(by_repeat), max(by_repeat)],
            }
        )
    return out


def measure_artifacts() -> dict[str, Any]:
    """Bytes one SQuAD run (default config, tuning split) uploads to MLflow, per file."""
    if not (SQUAD / "corpus.jsonl").is_file():
        raise SystemExit("run `make import-squad` first (outputs/squad is missing)")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        ragsweep(
            work,
            "corpus=squad",
            "golden=squad",
            f"corpus.path={SQUAD / 'corpus.jsonl'}",
            f"golden.path={SQUAD / 'golden.jsonl'}",
        )
        (root,) = (work / "outputs" / "mlartifacts").glob("*/artifacts")
        files = {
            p.relative_to(root).as_posix(): p.stat().st_size
            for p in sorted(root.rglob("*"))
            if p.is_file()
        }
        (cases_file,) = (work / "outputs").glob("runs/*/*/cases.jsonl")
        n_cases = len(cases_file.read_text(encoding="utf-8").splitlines())
    total = sum(files.values())
    return {
        "n_cases": n_cases,
        "files": files,
        "total_bytes": total,
        "bytes_per_case": round(total / n_cases),
    }


def table(results: dict[str, Any]) -> str:
    """The figures as the markdown rows of bench/README.md."""
    lines = []
    for name in ("single", "sweep"):
        if name in results:
            r = results[name]
            lines.append(
                f"| {name} | {r['median_on']:.2f} s | {r['median_off']:.2f} s | "
                f"{r['added']:.2f} s |"
            )
            if "median_foreground" in r:
                lines.append(
                    f"| {name}, in-process | {r['median_foreground']:.2f} s | "
                    f"{r['median_off']:.2f} s | {r['added_foreground']:.2f} s |"
                )
    if "sweep" in results and "added_per_further_run" in results["sweep"]:
        r = results["sweep"]
        for prefix, what in (("", "sweep's logger"), ("in_process_", "in-process")):
            for label, unit in (("", "wall"), ("cpu_", "CPU")):
                key = f"{prefix}{label}"
                if f"{key}per_further_run_median_of_repeats" not in r:
                    continue
                low, high = r[f"{key}per_further_run_range"]
                lines.append(
                    f"| per further sweep run, {what}, {unit} | | | "
                    f"{r[f'{key}per_further_run_median_of_repeats']} s median of repeats "
                    f"({low} to {high} s; from the medians {r[f'{key}added_per_further_run']} s) |"
                )
    if "artifacts" in results:
        a = results["artifacts"]
        lines.append(f"| SQuAD artifacts | {a['total_bytes']:,} bytes | {a['n_cases']} cases | |")
    return "\n".join(lines)


def main() -> None:
    global REPEATS  # --repeats sets it for this process
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "what", nargs="?", default="all", choices=["all", "single", "sweep", "artifacts"]
    )
    parser.add_argument("--repeats", type=int, default=REPEATS, help="timed runs per side")
    options = parser.parse_args()
    what = options.what
    REPEATS = options.repeats
    results: dict[str, Any] = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    steps = {
        "artifacts": measure_artifacts,
        "single": measure_single,
        "sweep": measure_sweep,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    for name in steps if what == "all" else [what]:
        results[name] = steps[name]()
        RESULTS.write_text(json.dumps(results, indent=2))  # each step kept as it ends
    print(json.dumps(results, indent=2))
    print(table(results))
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
