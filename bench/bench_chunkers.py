"""Chunkers and small-to-big retrieval at an equal context budget (issue 27).

    python bench/bench_chunkers.py demo            # the packaged demo (BM25, tuning split)
    python bench/bench_chunkers.py squad           # SQuAD dev half (make import-squad first)
    python bench/bench_chunkers.py demo --only parent   # one group of rows

Each row is one run (``tracking=off``, cache on) and prints ``recall_at_2000c`` (and
``recall_at_1000c``) with its 95% bootstrap interval, the mean characters packed into the
2000-character context and the number of chunks. A parent row (``retrieval.parent``) is
scored on the parents: the budget counts each parent's length. Figures: bench/README.md
("Issue 27: chunkers and small-to-big at an equal budget").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ragsweep.config.app import compose, plain_config
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import run_stages

REPO = Path(__file__).resolve().parents[1]

ROWS: dict[str, list[tuple[str, list[str]]]] = {
    "chunkers": [
        ("fixed 800/100", ["chunking=fixed"]),
        ("paragraph 800", ["chunking=paragraph"]),
        ("heading 1200/100", ["chunking=heading"]),
        ("recursive 800", ["chunking=recursive"]),
        ("sentence 800/100", ["chunking=sentence"]),
    ],
    "parent": [
        ("recursive 200", ["chunking=recursive", "chunking.size=200"]),
        (
            "recursive 200 -> section",
            ["chunking=recursive", "chunking.size=200", "retrieval.parent=section"],
        ),
        (
            "recursive 200 -> paragraph",
            ["chunking=recursive", "chunking.size=200", "retrieval.parent=paragraph"],
        ),
        (
            "recursive 200 -> window 800",
            [
                "chunking=recursive",
                "chunking.size=200",
                "retrieval.parent=window",
                "retrieval.parent_chars=800",
            ],
        ),
        (
            "sentence 300/0 -> window 800",
            [
                "chunking=sentence",
                "chunking.size=300",
                "chunking.overlap=0",
                "retrieval.parent=window",
                "retrieval.parent_chars=800",
            ],
        ),
    ],
    "tokens": [
        (
            "recursive 200 tokens",
            ["chunking=recursive", "chunking.unit=tokens", "chunking.size=200"],
        ),
        (
            "fixed 200/25 tokens",
            ["chunking=fixed", "chunking.unit=tokens", "chunking.size=200", "chunking.overlap=25"],
        ),
        (
            "sentence 200/25 tokens",
            [
                "chunking=sentence",
                "chunking.unit=tokens",
                "chunking.size=200",
                "chunking.overlap=25",
            ],
        ),
        (
            "recursive 50 tokens -> window 800",
            [
                "chunking=recursive",
                "chunking.unit=tokens",
                "chunking.size=50",
                "retrieval.parent=window",
                "retrieval.parent_chars=800",
            ],
        ),
    ],
    "semantic": [
        ("semantic 800, p95 (USE v3 sentences)", ["chunking=semantic"]),
        ("semantic 800, p80", ["chunking=semantic", "chunking.breakpoint_percentile=80"]),
    ],
}

DATASETS = {
    "demo": [],
    "squad": ["corpus=squad", "golden=squad"],
}


def run(overrides: list[str]) -> tuple[str, str, float, int]:
    """recall_at_2000c with its interval, recall_at_1000c, mean packed chars, chunks."""
    resolved = resolve(plain_config(compose(["tracking=off", *overrides])))
    done = run_stages(resolved)
    summary = done.summary

    def cell(name: str) -> str:
        bounds = summary.intervals[name]
        return f"{summary.overall[name]:.3f} [{bounds.low:.3f}, {bounds.high:.3f}]"

    chars = summary.overall.get("chars_used_at_2000c", float("nan"))
    return cell("recall_at_2000c"), cell("recall_at_1000c"), chars, len(done.built.chunks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=sorted(DATASETS))
    parser.add_argument("--only", choices=sorted(ROWS), action="append")
    args = parser.parse_args()
    print("| configuration | recall_at_2000c | recall_at_1000c | chars packed (2000c) | chunks |")
    print("|---|---|---|---|---|")
    for group in args.only or list(ROWS):
        for label, overrides in ROWS[group]:
            r2000, r1000, chars, n_chunks = run([*DATASETS[args.dataset], *overrides])
            print(f"| {label} | {r2000} | {r1000} | {chars:.0f} | {n_chunks} |", flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
