"""Start-up and MLflow on the way to a small result, two checkouts side by side (issue 31).

    python bench/bench_startup.py                          # this checkout alone
    python bench/bench_startup.py --against /path/to/src   # and another checkout's src/

Each row is a whole ``ragsweep`` process on the bundled demo data, its wall time taken the
way hyperfine takes it: one untimed run per row and side first (it creates the SQLite
store and fills the stage cache, so what is timed is warm), then ``--repeat`` rounds in
which every row runs once on every side, alternating, and each side's median is reported.
Load from other processes on the machine so falls on every side alike. The other
checkout runs with the same interpreter and libraries, its ``src`` first on
``PYTHONPATH``. Output goes to a pipe, as a script's would (so a single run logs before it
exits, ``tracking.background=auto``). Each side works in a folder of its own.

The ``resident`` rows (``tracking.resident=true``, docs/tracking.md "The resident logger")
run on this checkout only (a checkout without the key is skipped, ``-``): the resident
logger, private to the bench (its own ``XDG_RUNTIME_DIR``), is started by an untimed run
before timing and stopped (its socket removed) at the end. Their CPU column leaves out the
resident logger's own CPU: it is not a process the run waits for.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RAGSWEEP = [str(Path(sys.executable).parent / "ragsweep")]  # the console script
GRID = ["-m", "chunking.size=400,800", "chunking.overlap=0,100"]
RESIDENT = "tracking.resident=true"
ROWS: dict[str, list[str]] = {
    "demo 4-config BM25 grid, MLflow on": GRID,
    "demo 4-config BM25 grid, MLflow on, resident": [*GRID, RESIDENT],
    "demo 4-config BM25 grid, tracking=off": [*GRID, "tracking=off"],
    "demo one run to a pipe, MLflow on": [],
    "demo one run to a pipe, MLflow on, resident": [RESIDENT],
    "demo one run to a pipe, tracking=off": ["tracking=off"],
    "ragsweep --help": ["--help"],
}


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def runs_on(row_args: list[str], src: Path | None) -> bool:
    """Whether a row runs on a side: the resident rows on this checkout only."""
    return src is None or RESIDENT not in row_args


def timed(args: list[str], cwd: Path, src: Path | None) -> tuple[float, float]:
    """Wall seconds of one ``ragsweep`` process (it must succeed), and the CPU seconds of
    it and the processes it waited for (its logger): on a loaded machine the CPU time
    moves less than the wall time. The resident logger lives in ``cwd``'s ``runtime``."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": "", "XDG_RUNTIME_DIR": str(cwd / "runtime")}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    started, cpu = time.perf_counter(), cpu_of_children()
    done = subprocess.run(
        [*RAGSWEEP, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    seconds, cpu = time.perf_counter() - started, cpu_of_children() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{args} failed in {cwd}:\n{done.stderr[-3000:]}")
    return seconds, cpu


def _medians(timings: list[tuple[float, float]]) -> list[float]:
    """The median wall and the median CPU seconds."""
    return [round(statistics.median(t[i] for t in timings), 3) for i in (0, 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", type=Path, help="another checkout's src/ folder")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default="", help="only the rows whose name holds this")
    parser.add_argument("--out", type=Path, default=REPO / "outputs/bench/startup.json")
    args = parser.parse_args()
    rows = {name: row for name, row in ROWS.items() if args.only in name}
    sides: dict[str, Path | None] = {"this": None}
    if args.against is not None:
        sides = {"other": args.against.resolve(), **sides}
    with tempfile.TemporaryDirectory() as work:
        folders = {side: Path(work) / side for side in sides}
        for folder in folders.values():
            (folder / "runtime").mkdir(mode=0o700, parents=True)
        times: dict[str, dict[str, list[tuple[float, float]]]] = {
            r: {s: [] for s in sides} for r in rows
        }
        untimed = [*rows.values(), *(r for r in rows.values() if RESIDENT in r)]
        for row_args in untimed:  # store created, cache filled, resident logger started
            for side, src in sides.items():
                if runs_on(row_args, src):
                    timed(row_args, folders[side], src)
        for _ in range(args.repeat):
            for row, row_args in rows.items():
                for side, src in sides.items():
                    if runs_on(row_args, src):
                        times[row][side].append(timed(row_args, folders[side], src))
        for socket_file in Path(work).glob("*/runtime/ragsweep/*.sock"):
            socket_file.unlink()  # the resident logger exits
    medians = {row: {side: _medians(t) for side, t in by.items() if t} for row, by in times.items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"medians": medians, "times": times}, indent=1) + "\n")
    print(f"| what (wall; CPU) | {' | '.join(sides)} |\n|---|{'---|' * len(sides)}")
    for row, by_side in medians.items():
        cells = [
            f"{by_side[s][0]:.2f} s; {by_side[s][1]:.2f} s" if s in by_side else "-" for s in sides
        ]
        print(f"| {row} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
