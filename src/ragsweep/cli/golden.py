"""``ragsweep-golden``: what a golden set can decide, before it decides anything.

    ragsweep-golden stats [FILE] [--corpus PATH] [--holdout-fraction F]
                          [--alpha 0.05] [--power 0.8] [--discordance 0.2]

``stats`` loads and validates the golden set against its corpus (as a run does) and prints,
per split and question type, the answerable and unanswerable cases and the smallest paired
difference detectable at the given power (:mod:`ragsweep.eval.power`, whose assumptions the
output states). ``FILE``, ``--corpus`` and ``--holdout-fraction`` default to the project's
configured ``golden.path``, ``corpus.path`` and ``golden.holdout_fraction``.

    ragsweep-golden draft --n N --model M [--base-url URL] [--out FILE] [--seed S]

``draft`` has a model draft questions with evidence quotes for review in ``ragsweep label``
(:mod:`ragsweep.cli.golden_draft`; docs/golden.md).

    ragsweep-golden stamp [FILE] [--corpus PATH]

``stamp`` records the digest of each evidence document of the cases that have none (cases
written by hand), so that ``ragsweep label`` flags them once a document changes
(:mod:`ragsweep.data.golden_stamp`). Errors print ``error: ...`` and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ragsweep.cli.golden_draft import DraftOptions, run_draft
from ragsweep.config.app import refuse_bundled_write
from ragsweep.config.schema import CorpusConfig, GoldenConfig, from_mapping
from ragsweep.core.errors import ConfigError, RagsweepError
from ragsweep.core.names import SPLITS
from ragsweep.core.terminal import fit_markdown, markdown_table
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import GoldenCase, GoldenSet, load_golden
from ragsweep.data.golden_file import drafts_path
from ragsweep.data.golden_stamp import stamp_cases
from ragsweep.eval.power import PowerAssumptions, detectable_difference, min_discordant
from ragsweep.release.store import current_config

ALL_TYPES = "all types"
DEFAULT_DRAFT_URL = "http://127.0.0.1:8080/v1"
"""llama.cpp's server (``llama-server``, ``python -m llama_cpp.server``) on its default port."""
EXIT_ERROR = 2


@dataclass(frozen=True)
class SliceStats:
    """One split (and type, or :data:`ALL_TYPES`): its case counts and the smallest
    detectable paired difference on its answerable cases (None: none is)."""

    split: str
    type: str
    answerable: int
    unanswerable: int
    detectable: float | None


def slice_stats(golden: GoldenSet, assumptions: PowerAssumptions) -> list[SliceStats]:
    """Per split: all types first, then each type in name order."""
    rows = []
    for split in SPLITS:
        cases = golden.for_split(split)
        rows.append(_stats(split, ALL_TYPES, cases, assumptions))
        for type_name in sorted({c.type for c in cases}):
            typed = [c for c in cases if c.type == type_name]
            rows.append(_stats(split, type_name, typed, assumptions))
    return rows


def _stats(
    split: str, type_name: str, cases: Sequence[GoldenCase], assumptions: PowerAssumptions
) -> SliceStats:
    answerable = sum(c.scored for c in cases)  # permission cases get no recall
    return SliceStats(
        split,
        type_name,
        answerable,
        len(cases) - answerable,
        detectable_difference(answerable, assumptions),
    )


def render_stats(
    golden: GoldenSet, rows: Sequence[SliceStats], assumptions: PowerAssumptions
) -> str:
    """Markdown: the set, the assumptions, and one row per split and type."""
    answerable = sum(c.scored for c in golden.cases)
    needed = min_discordant(assumptions.alpha)
    lines = [
        "# Golden set",
        "",
        f"- **file**: {golden.path}",
        f"- **cases**: {len(golden.cases)} ({answerable} answerable, "
        f"{len(golden.cases) - answerable} unanswerable); digest {golden.digest[:12]}",
        "- **detectable difference**: the smallest mean difference of a 0/1 metric (e.g. "
        "hit_at_5) between two configurations on the same answerable cases that a "
        f"{assumptions.describe()} detects. `none`: fewer than {needed} discordant cases "
        f"are expected (with fewer, the sign-flip test of ragsweep-compare cannot reach "
        f"p < {assumptions.alpha}), or the difference would exceed 1.",
        "",
    ]
    table = [
        [
            r.split,
            r.type,
            str(r.answerable),
            str(r.unanswerable),
            "none" if r.detectable is None else f"{r.detectable:.3f}",
        ]
        for r in rows
    ]
    header = ["split", "type", "answerable", "unanswerable", "detectable difference"]
    lines.append(markdown_table(header, table))
    return fit_markdown("\n".join(lines)) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragsweep-golden", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    stats = commands.add_parser("stats", help="counts and detectable differences per split/type")
    stats.add_argument("file", nargs="?", help="golden JSONL (default: golden.path)")
    stats.add_argument("--corpus", help="corpus directory or JSONL (default: corpus.path)")
    stats.add_argument("--holdout-fraction", type=float, help="default: golden.holdout_fraction")
    defaults = PowerAssumptions()
    stats.add_argument("--alpha", type=float, default=defaults.alpha)
    stats.add_argument("--power", type=float, default=defaults.power)
    stats.add_argument("--discordance", type=float, default=defaults.discordance)
    drafts = commands.add_parser(
        "draft", help="a model drafts questions to review in ragsweep label"
    )
    drafts.add_argument("--n", type=int, required=True, help="drafts to attempt")
    drafts.add_argument("--out", help="drafts JSONL (default: beside golden.path)")
    drafts.add_argument("--model", required=True, help="model name as the server lists it")
    drafts.add_argument(
        "--base-url", default=DEFAULT_DRAFT_URL, help=f"default {DEFAULT_DRAFT_URL}"
    )
    drafts.add_argument("--api-key-env", help="environment variable holding an API key")
    drafts.add_argument("--seed", type=int, default=0)
    drafts.add_argument("--max-tokens", type=int, default=200)
    drafts.add_argument("--timeout", type=float, default=300.0, help="seconds per call")
    drafts.add_argument("--corpus", help="corpus directory or JSONL (default: corpus.path)")
    stamps = commands.add_parser(
        "stamp", help="record evidence documents' digests so later changes are flagged"
    )
    stamps.add_argument("file", nargs="?", help="golden JSONL (default: golden.path)")
    stamps.add_argument("--corpus", help="corpus directory or JSONL (default: corpus.path)")
    return parser


def _corpus_config(configured: Mapping[str, Any], path: str | None) -> CorpusConfig:
    """The project's corpus config (its extensions, parsers and link policy included), with
    ``path`` (``--corpus``) in place of its path when given."""
    cfg = from_mapping(CorpusConfig, configured["corpus"], "corpus")
    return replace(cfg, path=path) if path else cfg


def _golden_config(configured: Mapping[str, Any], path: str | None) -> GoldenConfig:
    """The project's golden config (all of it, as a run reads it), with ``path`` in place of
    its path when given."""
    cfg = from_mapping(GoldenConfig, configured["golden"], "golden")
    return replace(cfg, path=path) if path else cfg


def stats_main(options: argparse.Namespace) -> str:
    """Load the golden set named by ``options`` and return its stats as Markdown."""
    try:
        assumptions = PowerAssumptions(options.alpha, options.power, options.discordance)
    except ValueError as exc:
        raise ConfigError(f"--{exc}") from None
    configured = current_config()
    golden_cfg = _golden_config(configured, options.file)
    if options.holdout_fraction is not None:
        golden_cfg = replace(golden_cfg, holdout_fraction=options.holdout_fraction)
    corpus = load_corpus(_corpus_config(configured, options.corpus))
    golden = load_golden(golden_cfg, corpus)
    return render_stats(golden, slice_stats(golden, assumptions), assumptions)


def draft_main(options: argparse.Namespace) -> str:
    """Draft questions into the drafts file (:mod:`ragsweep.cli.golden_draft`)."""
    if options.n < 1:
        raise ConfigError(f"--n {options.n}: draft at least 1 question")
    configured = current_config()
    golden_path = Path(configured["golden"]["path"])
    out = Path(options.out) if options.out else drafts_path(golden_path)
    refuse_bundled_write(out, "pass --out FILE for the drafts.")
    corpus = load_corpus(_corpus_config(configured, options.corpus))
    draft_options = DraftOptions(
        options.n,
        options.model,
        options.base_url,
        options.api_key_env,
        options.seed,
        options.max_tokens,
        options.timeout,
    )
    return run_draft(corpus, golden_path, out, draft_options)


def stamp_main(options: argparse.Namespace) -> str:
    """Stamp the golden set's cases (:mod:`ragsweep.data.golden_stamp`); the summary."""
    configured = current_config()
    path = Path(options.file or configured["golden"]["path"])
    refuse_bundled_write(path, "pass the FILE to stamp.")
    if not path.is_file():
        raise ConfigError(
            f"{path}: no such golden file, so there is nothing to stamp: pass the FILE to "
            "stamp (or set golden.path to it)"
        )
    golden_cfg = _golden_config(configured, str(path))
    corpus = load_corpus(_corpus_config(configured, options.corpus))
    outcome = stamp_cases(corpus, golden_cfg)
    counts = ", ".join(f"{count} {what}" for what, count in sorted(outcome.items()))
    return f"{path}: {counts or 'no cases'}\n"


COMMANDS = {"stats": stats_main, "draft": draft_main, "stamp": stamp_main}


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    options = _parser().parse_args(argv)
    command = COMMANDS[options.command]
    try:
        sys.stdout.write(command(options))
    except RagsweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_ERROR)
