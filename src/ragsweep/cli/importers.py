"""``ragsweep-import FORMAT ...``: convert a public QA dataset into corpus.jsonl, golden.jsonl
and SOURCE.md.

Each format is a subcommand registered in :data:`IMPORTERS`; a new format adds its
:class:`ImporterCommand` there. Bad input prints one ``error: ...`` line and exits with 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ragsweep.core.errors import RagsweepError
from ragsweep.core.registry import Registry
from ragsweep.data.squad import EVIDENCE, ImportSummary, import_squad


class ImporterCommand(Protocol):
    """The command-line side of one import format."""

    @property
    def description(self) -> str: ...

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> ImportSummary: ...


@dataclass(frozen=True)
class SquadCommand:
    """``ragsweep-import squad FILE OUT_DIR [options]``."""

    description: str = (
        "SQuAD 2.0 (or 1.1) JSON: one document per article, one golden case per question"
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", type=Path, metavar="FILE", help="SQuAD JSON file")
        parser.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="output directory")
        parser.add_argument(
            "--evidence",
            choices=EVIDENCE.names(),
            default="answer",
            help="evidence span per answerable question (default: %(default)s)",
        )
        parser.add_argument(
            "--max-articles", type=int, metavar="N", help="import only the first N articles"
        )
        parser.add_argument(
            "--holdout-fraction",
            type=float,
            metavar="F",
            help="write an explicit split per case, holdout with probability F (by id hash)",
        )

    def run(self, args: argparse.Namespace) -> ImportSummary:
        return import_squad(
            args.file,
            args.out_dir,
            evidence=args.evidence,
            max_articles=args.max_articles,
            holdout_fraction=args.holdout_fraction,
        )


IMPORTERS: Registry[ImporterCommand] = Registry("format")
IMPORTERS.add("squad", SquadCommand())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragsweep-import",
        description="Convert a QA dataset into a ragsweep corpus and golden set.",
    )
    formats = parser.add_subparsers(dest="format", required=True, metavar="FORMAT")
    for name in IMPORTERS:
        command = IMPORTERS.get(name)
        subparser = formats.add_parser(
            name, help=command.description, description=command.description
        )
        command.add_arguments(subparser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the importer named by the first argument; return the process exit code."""
    args = build_parser().parse_args(argv)
    try:
        summary = IMPORTERS.get(args.format).run(args)
    except RagsweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(describe(summary))
    return 0


def describe(summary: ImportSummary) -> str:
    """What was written, one file per line."""
    splits = "" if summary.holdout is None else f"; {summary.holdout} in the holdout split"
    return "\n".join(
        [
            f"wrote {summary.corpus_path}: {summary.documents} documents "
            f"({summary.paragraphs} paragraphs)",
            f"wrote {summary.golden_path}: {summary.cases} cases "
            f"({summary.answerable} answerable, {summary.unanswerable} unanswerable{splits})",
            f"wrote {summary.source_path}",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
