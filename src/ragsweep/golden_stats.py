"""``ragsweep-golden stats FILE``: how many cases a golden set has, and what they can decide.

For each split and question type the command prints the number of answerable and
unanswerable cases and the *minimum detectable effect* (MDE): the smallest mean paired
difference of a per-case metric between two configurations, evaluated on the same
answerable cases, that a two-sided test at level ``alpha`` detects with probability
``power``. Under the normal approximation for the mean of ``n`` per-case differences with
standard deviation ``sigma_d``::

    MDE = (z_{1 - alpha/2} + z_{power}) * sigma_d / sqrt(n)

A per-case metric in [0, 1] (``hit_at_k``, ``recall_at_k``, ...) gives differences in
[-1, 1], whose standard deviation is at most 1: the default ``sigma_d = 1`` is that worst
case. For a 0/1 metric such as ``hit_at_k``, ``sigma_d <= sqrt(q)`` where ``q`` is the share
of cases on which the two configurations disagree (discordant pairs), so ``--sigma 0.5``
states that at most a quarter of the cases flip. The file is loaded and validated with
:func:`ragsweep.golden.load_golden` against its corpus, so counts are those a run would use.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

from ragsweep.config import SPLITS, CorpusConfig, GoldenConfig
from ragsweep.corpus import Corpus, load_corpus
from ragsweep.errors import RagsweepError
from ragsweep.golden import GoldenCase, GoldenSet, load_golden
from ragsweep.report import markdown_table

ALL = "(all)"
"""The row label of a total over every type (or both splits)."""

EXIT_ERROR = 2


class GoldenStatsError(RagsweepError):
    """A golden set whose corpus cannot be found (names the paths looked at)."""


@dataclass(frozen=True)
class PowerAssumptions:
    """The test an MDE refers to: two-sided at level ``alpha`` (a probability in (0, 1)),
    detected with probability ``power`` (in (0, 1)), per-case differences with standard
    deviation ``sigma`` (in metric units, > 0; 1 is the worst case for metrics in [0, 1])."""

    alpha: float = 0.05
    power: float = 0.8
    sigma: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha={self.alpha} must be in (0, 1)")
        if not 0.0 < self.power < 1.0:
            raise ValueError(f"power={self.power} must be in (0, 1)")
        if not self.sigma > 0.0:
            raise ValueError(f"sigma={self.sigma} must be > 0")

    @property
    def z_sum(self) -> float:
        """``z_{1 - alpha/2} + z_{power}`` (standard normal quantiles)."""
        normal = NormalDist()
        return normal.inv_cdf(1.0 - self.alpha / 2.0) + normal.inv_cdf(self.power)

    def mde(self, n: int) -> float | None:
        """The minimum detectable mean paired difference over ``n`` cases (metric units);
        None when ``n`` is 0."""
        return self.z_sum * self.sigma / math.sqrt(n) if n > 0 else None

    def describe(self) -> str:
        """The assumptions, stated in one paragraph (wrapped at 92 columns)."""
        text = (
            f"MDE: the smallest mean paired difference of a per-case metric in [0, 1] "
            f"between two configurations on the same answerable cases that a two-sided test "
            f"at alpha = {self.alpha:g} detects with {self.power:.0%} power, by the normal "
            f"approximation: MDE = (z_(1-alpha/2) + z_power) * sigma_d / sqrt(n) = "
            f"{self.z_sum:.4f} * {self.sigma:g} / sqrt(n), with n the answerable cases of "
            f"the row and sigma_d = {self.sigma:g} the standard deviation of the per-case "
            f"differences (1 is the worst case; for a 0/1 metric sigma_d <= sqrt(share of "
            f"cases on which the two configurations disagree)). An MDE above 1 means that "
            f"no difference of such a metric is detectable."
        )
        return textwrap.fill(text, width=92)


@dataclass(frozen=True)
class SliceCount:
    """Cases of one split (or ``ALL``) and one type (or ``ALL``)."""

    split: str
    type: str
    answerable: int
    unanswerable: int


def slice_counts(golden: GoldenSet) -> list[SliceCount]:
    """Counts per split (``tuning``, then ``holdout``) and type (sorted), each split followed
    by its total over types, then the total over both splits."""
    rows: list[SliceCount] = []
    for split in SPLITS:
        cases = golden.for_split(split)
        rows += [_count(split, t, [c for c in cases if c.type == t]) for t in golden.types]
        rows.append(_count(split, ALL, cases))
    rows.append(_count(ALL, ALL, golden.cases))
    return rows


def _count(split: str, case_type: str, cases: Sequence[GoldenCase]) -> SliceCount:
    answerable = sum(1 for case in cases if case.answerable)
    return SliceCount(split, case_type, answerable, len(cases) - answerable)


def render(golden: GoldenSet, corpus_source: str, assumptions: PowerAssumptions) -> str:
    """The report: what was read, the table of counts and MDEs, and the assumptions."""
    header = ["split", "type", "answerable", "unanswerable", "MDE"]
    rows = [
        [r.split, r.type, str(r.answerable), str(r.unanswerable), _mde_text(assumptions, r)]
        for r in slice_counts(golden)
    ]
    return "\n\n".join(
        [
            f"golden set {golden.path}: {len(golden.cases)} cases "
            f"(sha256 {golden.digest[:12]}), validated against corpus {corpus_source}",
            markdown_table(header, rows),
            assumptions.describe(),
        ]
    )


def _mde_text(assumptions: PowerAssumptions, row: SliceCount) -> str:
    mde = assumptions.mde(row.answerable)
    return "-" if mde is None else f"{mde:.3f}"


# ---------------------------------------------------------------------------- command line


def default_corpus(golden_path: Path) -> Path:
    """The corpus beside a golden file: a ``corpus/`` directory, else ``corpus.jsonl`` (the
    layouts of ``demo/`` and of ``ragsweep-import``)."""
    for candidate in (golden_path.parent / "corpus", golden_path.parent / "corpus.jsonl"):
        if candidate.exists():
            return candidate
    raise GoldenStatsError(
        f"{golden_path}: no corpus given and none beside it (looked for "
        f"{golden_path.parent / 'corpus'} and {golden_path.parent / 'corpus.jsonl'}); "
        "pass --corpus PATH"
    )


def _open_unit(name: str) -> Callable[[str], float]:
    """An argparse type: a float strictly between 0 and 1."""

    def parse(text: str) -> float:
        value = _float(text)
        if not 0.0 < value < 1.0:
            raise argparse.ArgumentTypeError(f"{name} must be in (0, 1), got {text}")
        return value

    return parse


def _positive(text: str) -> float:
    value = _float(text)
    if not value > 0.0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _fraction(text: str) -> float:
    value = _float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragsweep-golden", description="Inspect a golden set (docs/formats.md)."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    stats = commands.add_parser(
        "stats",
        help="case counts per split and type, and the smallest detectable paired difference",
        description="Answerable and unanswerable cases per split and type, and the minimum "
        "detectable paired difference (MDE) of a per-case metric in [0, 1] (docs/metrics.md).",
    )
    stats.add_argument("file", type=Path, metavar="FILE", help="golden set (JSONL)")
    stats.add_argument(
        "--corpus",
        type=Path,
        metavar="PATH",
        help="corpus directory or .jsonl file the evidence refers to "
        "(default: corpus/ or corpus.jsonl beside FILE)",
    )
    stats.add_argument(
        "--holdout-fraction",
        type=_fraction,
        default=GoldenConfig.holdout_fraction,
        metavar="F",
        help="split for cases without one, as golden.holdout_fraction (default: 1/3)",
    )
    stats.add_argument(
        "--alpha",
        type=_open_unit("alpha"),
        default=PowerAssumptions.alpha,
        help="significance level of the two-sided test (default: %(default)s)",
    )
    stats.add_argument(
        "--power",
        type=_open_unit("power"),
        default=PowerAssumptions.power,
        help="probability of detecting the difference (default: %(default)s)",
    )
    stats.add_argument(
        "--sigma",
        type=_positive,
        default=PowerAssumptions.sigma,
        help="standard deviation of the per-case differences, in metric units "
        "(default: %(default)s, the worst case for metrics in [0, 1])",
    )
    return parser


def run_stats(args: argparse.Namespace) -> str:
    """Load and validate the golden set named by ``args``; return the report."""
    assumptions = PowerAssumptions(alpha=args.alpha, power=args.power, sigma=args.sigma)
    golden_cfg = GoldenConfig(path=str(args.file), holdout_fraction=args.holdout_fraction)
    if not args.file.is_file():
        # The loader reports a missing path (or one that is not a file) before it reads any
        # evidence, so an empty corpus gets its message without guessing a corpus first.
        load_golden(golden_cfg, Corpus(documents=(), source="(none)"))
    corpus_path = args.corpus if args.corpus is not None else default_corpus(args.file)
    corpus = load_corpus(CorpusConfig(path=str(corpus_path)))
    return render(load_golden(golden_cfg, corpus), str(corpus_path), assumptions)


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the exit status (2 on an error)."""
    args = build_parser().parse_args(argv)
    try:
        print(run_stats(args))
    except RagsweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
