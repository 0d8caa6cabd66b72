"""What ``ragsweep check`` prints: every problem, or a one-screen summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ragsweep.check.problems import Problem
from ragsweep.core.names import SPLITS
from ragsweep.core.terminal import DEFAULT_WIDTH, wrap
from ragsweep.eval.power import PowerAssumptions, detectable_difference, power_remark
from ragsweep.run.describe import STEPS, describe

if TYPE_CHECKING:
    from ragsweep.check.config import ConfigCheck
    from ragsweep.check.sweeps import SweepCheck
    from ragsweep.data.corpus import Corpus
    from ragsweep.data.golden import GoldenSet

LABEL_WIDTH = 10


@dataclass
class Facts:
    """What a clean check shows. ``chunks``: ``(chunking label, chunk count)`` pairs (count
    None: counted at run time)."""

    config: ConfigCheck | None = None
    corpus: Corpus | None = None
    golden: GoldenSet | None = None
    sweep: SweepCheck | None = None
    store: str | None = None
    chunks: list[tuple[str, int | None]] = field(default_factory=list)


def render_problems(problems: Sequence[Problem], width: int = DEFAULT_WIDTH) -> str:
    """``ragsweep check: N problem(s)`` and each problem on a line of its own, two columns
    in; one wider than ``width`` continues on the next lines, four columns in."""
    lines = [f"ragsweep check: {len(problems)} problem(s); nothing was run"]
    for problem in problems:
        lines += wrap(str(problem), width, "  ", "  ")
    return "\n".join(lines)


def _section(label: str, lines: Sequence[str], width: int) -> list[str]:
    """``lines`` with ``label`` before the first one and the others indented alike; a line
    wider than ``width`` columns continues on the next, two columns further in."""
    out = []
    for line in lines:
        lead = " " * LABEL_WIDTH + line[: len(line) - len(line.lstrip())]
        out += wrap(line.lstrip(), width, lead, "  ")
    return [f"{label:<{LABEL_WIDTH}}{out[0][LABEL_WIDTH:]}", *out[1:]]


def _config_lines(config: ConfigCheck) -> list[str]:
    assert config.resolved is not None and config.data is not None
    resolved = config.resolved
    cfg = resolved.cfg
    return [
        f"hash {resolved.config_hash[:12]}  preprocess {describe(cfg, STEPS)}",
        f"embedding {resolved.model.describe()}",
        f"objective {resolved.objective.name} on split {cfg.eval.split}",
        f"outputs under {config.data['paths']['output_dir']}",
    ]


def _golden_lines(golden: GoldenSet) -> list[str]:
    """Cases per type (rows) and split (columns), with totals."""
    counts = Counter((case.type, case.split) for case in golden.cases)
    width = max([len("type"), *(len(t) for t in golden.types)])
    header = f"  {'type':<{width}}" + "".join(f"{s:>9}" for s in SPLITS)
    rows = [
        f"  {kind:<{width}}" + "".join(f"{counts[kind, s]:>9}" for s in SPLITS)
        for kind in golden.types
    ]
    totals = Counter(case.split for case in golden.cases)
    total = f"  {'all':<{width}}" + "".join(f"{totals[s]:>9}" for s in SPLITS)
    return [f"{len(golden.cases)} cases  {golden.path}", header, *rows, total, *_power(golden)]


def _power(golden: GoldenSet) -> list[str]:
    """Per split, the smallest difference a paired test detects on its answerable cases
    (:mod:`ragsweep.eval.power`), and a warning for a split that detects none."""
    answerable = Counter(case.split for case in golden.cases if case.scored)
    assumptions = PowerAssumptions()
    figures = []
    for split in SPLITS:
        mde = detectable_difference(answerable[split], assumptions)
        figures.append(f"{split} {'none' if mde is None else f'{mde:.3f}'}")
    lines = [f"detectable difference (80% power, ragsweep-golden stats): {', '.join(figures)}"]
    for split in SPLITS:
        remark = power_remark(answerable[split], None, assumptions)
        if remark is not None:
            lines.append(f"warning: the {split} split's {remark}")
    return lines


def _chunk_lines(chunks: Sequence[tuple[str, int | None]], sweeping: bool) -> list[str]:
    width = max((len(label) for label, _ in chunks), default=0)
    lines = [f"{label:<{width}}  {_chunk_count(count)}" for label, count in chunks]
    if sweeping:
        lines.append(
            "(each sweep value on the sweep's baseline, not on what earlier axes will choose; "
            "counted in memory, nothing indexed)"
        )
    return lines


def _chunk_count(count: int | None) -> str:
    """A chunk count, or why there is none (semantic chunks need the sentence model)."""
    return (
        f"{count:>7,}"
        if count is not None
        else "counted at run time (semantic: needs the sentence model)"
    )


def _sweep_lines(sweep: SweepCheck) -> list[str]:
    assert sweep.spec is not None
    spec = sweep.spec
    return [
        f"{spec.name}  {spec.path}",
        f"{len(spec.axes)} axes, {sweep.values} values; objective {spec.objective} "
        f"({spec.direction}), min_improvement {spec.min_improvement:g}",
    ]


def render_summary(facts: Facts, width: int = DEFAULT_WIDTH) -> str:
    """The one-screen summary of a check without problems, in lines of at most ``width``
    columns where a word allows."""
    lines = ["ragsweep check: no problems found; nothing was run", ""]
    if facts.config is not None and facts.config.resolved is not None:
        lines += _section("config", _config_lines(facts.config), width)
    if facts.corpus is not None:
        corpus = facts.corpus
        about = f"{len(corpus)} documents, {corpus.n_chars:,} characters  {corpus.source}"
        lines += _section("corpus", [about], width)
    if facts.golden is not None:
        lines += _section("golden", _golden_lines(facts.golden), width)
    if facts.chunks:
        lines += _section("chunks", _chunk_lines(facts.chunks, facts.sweep is not None), width)
    if facts.sweep is not None and facts.sweep.spec is not None:
        lines += _section("sweep", _sweep_lines(facts.sweep), width)
    if facts.store is not None:
        lines += _section("tracking", [facts.store], width)
    return "\n".join(lines)
