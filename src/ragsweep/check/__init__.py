"""``ragsweep check [OVERRIDES...]``: validate everything a run or sweep would use, without
running anything (docs/install.md).

Checked, in one pass, every problem reported: the composed config (every override, every
config group, the registry names a run resolves), the corpus, the golden set (every line),
the eval split, the sweep file named by ``sweep=NAME`` (the sweeper's own checks before it
launches: every axis value composed, the one-factor check, objective and direction) and
the tracking store's reachability (a probe bounded by :data:`ragsweep.check.store.TIMEOUT_S`).
Exit status 2 with the list of problems, else 0 with a one-screen summary: documents,
chunks per configuration (the run's, and each sweep value's: counted by chunking in memory;
nothing is indexed or written), cases per split and type.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ragsweep.check.compose import Composer, composer
from ragsweep.check.config import ConfigCheck, check_config
from ragsweep.check.golden import check_golden, check_golden_alone
from ragsweep.check.problems import Problem
from ragsweep.check.store import StoreProblem, probe
from ragsweep.check.summary import Facts, render_problems, render_summary
from ragsweep.check.sweeps import SweepCheck, check_sweep, chunking_label
from ragsweep.chunk.chunkers import SEMANTIC, ChunkTools, chunk_corpus
from ragsweep.config.app import project_sweeps_dir
from ragsweep.config.schema import ChunkingConfig, EmbeddingConfig
from ragsweep.core.errors import RagsweepError
from ragsweep.core.terminal import terminal_width
from ragsweep.data.corpus import Corpus, load_corpus
from ragsweep.data.golden import GoldenSet
from ragsweep.index.chunk_tokens import chunk_tokenizer
from ragsweep.run.config import select_cases
from ragsweep.tracking.log import tracking_uri

EXIT_PROBLEMS = 2


@dataclass
class Findings:
    """What the checks found: problems, and the facts the summary shows."""

    problems: list[Problem] = field(default_factory=list)
    facts: Facts = field(default_factory=Facts)


def run_checks(overrides: Sequence[str]) -> Findings:
    """Every check (see module docstring) on the config ``ragsweep OVERRIDES`` composes."""
    found = Findings()
    with composer() as c:
        cfg, problems = c.compose_all(overrides)
        found.problems += problems
        if cfg is None:
            return found
        config = check_config(c, cfg, overrides)
        found.problems += config.problems
        found.facts.config = config
        _check_data(config, found)
        _check_store(config, found)
        sweeps_dir = OmegaConf.select(cfg, "hydra.sweeper.sweeps_dir", default=None)
        _check_sweep(c, config, cfg, Path(sweeps_dir or project_sweeps_dir()), found)
    return found


def _check_data(config: ConfigCheck, found: Findings) -> None:
    """Corpus, golden set and the evaluated split; without a readable corpus, what of the
    golden set needs no documents."""
    corpus = None
    if "corpus" in config.groups:
        try:
            corpus = load_corpus(config.groups["corpus"])
        except RagsweepError as exc:
            found.problems.append(Problem("", str(exc)))
    if corpus is None:
        if "golden" in config.groups:
            found.problems += check_golden_alone(config.groups["golden"])
        return
    found.facts.corpus = corpus
    if "golden" not in config.groups:
        return
    checked = check_golden(config.groups["golden"], corpus)
    found.problems += checked.problems
    found.facts.golden = checked.golden
    if checked.golden is not None and "eval" in config.groups:
        found.problems += _split_problems(checked.golden, config.groups["eval"].split)


def _split_problems(golden: GoldenSet, split: str) -> list[Problem]:
    try:
        select_cases(golden, split)
    except RagsweepError as exc:
        return [Problem("eval.split", str(exc))]
    return []


def _check_store(config: ConfigCheck, found: Findings) -> None:
    tracking = config.groups.get("tracking")
    if tracking is None:
        return
    if not tracking.enabled:
        found.facts.store = "disabled (tracking.enabled=false): nothing is logged"
        return
    try:
        found.facts.store = probe(tracking_uri(tracking))
    except (StoreProblem, RagsweepError) as exc:
        found.problems.append(Problem("tracking", str(exc)))


def _check_sweep(
    c: Composer, config: ConfigCheck, cfg: DictConfig, sweeps_dir: Path, found: Findings
) -> None:
    """The sweep file named by ``sweep=NAME``, looked up and checked as the sweeper would,
    on the config of the command line's valid overrides (a bad one is reported once)."""
    name = (config.data or {}).get("sweep")
    if not name:
        return
    checked = check_sweep(c, cfg, str(name), sweeps_dir)
    found.problems += checked.problems
    found.facts.sweep = checked


def chunk_counts(
    corpus: Corpus, config: ConfigCheck, sweep: SweepCheck | None
) -> list[tuple[str, int | None]]:
    """``(label, chunks)`` for the run's chunking, then each other sweep value's, each
    chunked with its own tools (the tokenizer of ``chunking.unit=tokens``); None for
    ``chunking.mode=semantic``, whose chunks need the sentence model (counted at run time)."""
    if config.resolved is None:  # an invalid run config is a problem: no summary is shown
        return []
    run = config.resolved.cfg.chunking
    embedding = config.resolved.cfg.embedding
    configs: dict[ChunkingConfig, tuple[str, ChunkTools | None]] = {
        run: (f"{chunking_label(run)} (this run)", config.resolved.chunk_tools)
    }
    for label, chunking in sweep.chunkings if sweep else ():
        configs.setdefault(chunking, (label, None))
    return [(label, _count(corpus, c, tools, embedding)) for c, (label, tools) in configs.items()]


def _count(
    corpus: Corpus, chunking: ChunkingConfig, tools: ChunkTools | None, embedding: EmbeddingConfig
) -> int | None:
    """The number of chunks of ``chunking`` (None for a semantic one)."""
    if chunking.mode == SEMANTIC:
        return None
    if tools is None:
        tools = ChunkTools(tokenizer=chunk_tokenizer(chunking, embedding))
    return len(chunk_corpus(corpus, chunking, tools))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragsweep check",
        description="Validate the config, corpus, golden set, sweep file and tracking store "
        "a run would use, without running anything. Exit status 2 if anything is wrong.",
    )
    parser.add_argument(
        "overrides", nargs="*", help="as for ragsweep, e.g. corpus=handbook sweep=chunking"
    )
    # Accepted so that a run's command line can be checked as typed (``ragsweep check -m
    # sweep=chunking -v``); check reads the sweep file whenever sweep= is given.
    parser.add_argument("-m", "--multirun", action="store_true", help="ignored (as typed)")
    parser.add_argument("-v", "--verbose", action="store_true", help="ignored (as typed)")
    return parser


def main(argv: Sequence[str]) -> int:
    """``ragsweep check``: 0 and a summary, or 2 and every problem found."""
    args = build_parser().parse_intermixed_args(list(argv))
    found = run_checks(args.overrides)
    if found.problems:
        print(render_problems(found.problems, terminal_width()), file=sys.stderr)
        return EXIT_PROBLEMS
    facts = found.facts
    if facts.corpus is not None and facts.config is not None:
        facts.chunks = chunk_counts(facts.corpus, facts.config, facts.sweep)
    print(render_summary(facts, terminal_width()))
    return 0
