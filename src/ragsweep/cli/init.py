"""``ragsweep init [DIR]``: write a starter project for your own documents (docs/install.md).

The project gets config options for its corpus and golden set (``conf/corpus/NAME.yaml``,
``conf/golden/NAME.yaml``), its defaults (``conf/project/default.yaml``: those two are the
corpus and golden set of every command run in the project folder), a sweep file
(``sweeps/NAME.yaml``), a golden-set template with one example of each evidence form and a
README of next steps; ``--example retriever`` adds an example retriever class
(``retrievers/example.py``), and in a project that has its defaults file already, writes
only that. When the corpus folder does
not exist yet, two example documents are written into it so that the template's examples
resolve and ``ragsweep check`` passes at once; when the golden file exists already, the
template goes to ``golden.template.jsonl`` beside it. Nothing is ever overwritten: if any
file to be written exists, nothing is written and the command exits 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ragsweep.config.app import (
    PROJECT_GROUP,
    PROJECT_OPTION,
    config_dir,
    project_defaults_file,
)
from ragsweep.core.names import HOLDOUT, TUNING

DEFAULT_NAME = "project"
DEFAULT_CORPUS = "docs"
DEFAULT_GOLDEN = "golden.jsonl"
TEMPLATE_BESIDE = "golden.template.jsonl"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")

RETRIEVER_EXAMPLE = "retriever"
EXAMPLE_RETRIEVER_FILE = Path("retrievers/example.py")
EXAMPLE_RETRIEVER_SOURCE = "example_retriever.py"  # in this package, copied as it is
EXAMPLE_RETRIEVER_TARGET = "retrievers.example.TfidfRetriever"
EXAMPLE_RETRIEVER_COMMAND = (
    f"ragsweep embedding=custom embedding.options._target_={EXAMPLE_RETRIEVER_TARGET}"
)

EXAMPLE_MD = """\
# Example handbook

These two files (example.md and faq.md) were written by `ragsweep init` so that the
golden-set template has something to point at. Replace them with your own documents.

## Passwords

To reset your password, choose Forgot password on the sign-in page. The reset link is
valid for 60 minutes and can be used once.

## Exporting data

1. Open Settings > Data.
2. Choose Export workspace.
3. Download the ZIP archive from the link in the email you receive.

## Deleting a workspace

Owners can delete a workspace from Settings > Data. Deleted workspaces are kept for 30 days
and then removed for good.
"""

FAQ_MD = """\
# Frequently asked questions

## Is there a free plan?

Yes. The free plan includes 3 members and 1 GB of storage.

## Can I get a refund?

Annual plans can be refunded within 14 days of purchase. Monthly plans are not refunded.
"""

EXAMPLE_DOCS = {"example.md": EXAMPLE_MD, "faq.md": FAQ_MD}
EXPORT_STEPS = "1. Open Settings > Data."  # the offsets example spans from here ...
EXPORT_END = "link in the email you receive."  # ... to the end of this


@dataclass(frozen=True)
class StarterFile:
    """One file of the starter project: ``path`` relative to the project folder."""

    path: Path
    text: str


def _case(case_id: str, question: str, kind: str, split: str, **fields: Any) -> dict[str, Any]:
    return {"id": case_id, "question": question, "type": kind, "split": split, **fields}


def _offsets(doc: str, first: str, last: str) -> dict[str, Any]:
    """An offsets evidence item from the start of ``first`` to the end of ``last`` in the
    example document ``doc`` (character offsets, end-exclusive)."""
    text = EXAMPLE_DOCS[doc]
    start = text.index(first)
    return {"doc": doc, "start": start, "end": text.index(last, start) + len(last)}


def golden_template() -> list[dict[str, Any]]:
    """Example cases, one per evidence form (docs/formats.md), pointing at the example
    documents. ``notes`` is accepted and ignored by ragsweep: here it explains each form."""
    return [
        _case(
            "ex-quote",
            "How long can I use the password reset link?",
            "factual",
            TUNING,
            evidence=[{"doc": "example.md", "quote": "The reset link is valid for 60 minutes"}],
            notes="a quote, copied from the document; line breaks and NFKC width "
            "differences are tolerated",
        ),
        _case(
            "ex-occurrence",
            "Where do I delete a workspace?",
            "factual",
            TUNING,
            evidence=[{"doc": "example.md", "quote": "Settings > Data", "occurrence": 2}],
            notes="a quote that occurs more than once: occurrence picks one (1 = first)",
        ),
        _case(
            "ex-offsets",
            "How do I export my workspace?",
            "procedural",
            TUNING,
            evidence=[_offsets("example.md", EXPORT_STEPS, EXPORT_END)],
            notes="character offsets [start, end) into the document text",
        ),
        _case(
            "ex-multi",
            "If I delete my workspace, how long is it kept, and is my annual plan refunded?",
            "multi_doc",
            TUNING,
            evidence=[
                {"doc": "example.md", "quote": "Deleted workspaces are kept for 30 days"},
                {"doc": "faq.md", "quote": "Annual plans can be refunded within 14 days"},
            ],
            notes="several evidence items, in several documents",
        ),
        _case(
            "ex-negative",
            "Is there an on-premises version?",
            "negative",
            TUNING,
            answerable=False,
            notes="not answered anywhere in the corpus: answerable false, no evidence",
        ),
        _case(
            "ex-scope",
            "What does the free plan include?",
            "factual",
            HOLDOUT,
            scope=["faq.md"],
            evidence=[{"doc": "faq.md", "quote": "3 members and 1 GB of storage"}],
            notes="scope restricts retrieval to these documents; holdout: kept for promotion",
        ),
    ]


def _jsonl(rows: Sequence[dict[str, Any]]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _config_path(project: Path, given: str | None, default: str) -> tuple[str, Path]:
    """``(YAML value, absolute path)`` for a corpus or golden path: relative to
    ``${paths.root_dir}`` when it lies in the project, else absolute."""
    path = (project / default) if given is None else Path(given).expanduser().resolve()
    try:
        return "${paths.root_dir}/" + path.relative_to(project).as_posix(), path
    except ValueError:
        return str(path), path


def _corpus_yaml(name: str, value: str) -> str:
    return (
        "# Your documents (docs/formats.md): a folder of .md/.markdown/.txt, .html, .pdf and\n"
        "# .docx files, or a JSONL\n"
        "# file. The default corpus in this folder (conf/project/default.yaml); elsewhere\n"
        f"# `ragsweep corpus={name}`. ${{paths.root_dir}} is the folder ragsweep runs from\n"
        "# (or $RAGSWEEP_ROOT).\n"
        f"name: {name}\npath: {value}\nextensions: [.md, .markdown, .txt]\n"
        "# Parsers of .html/.htm, .pdf and .docx files (`off`: not read; docs/formats.md)\n"
        "html_parser: markdownify\npdf_parser: pypdf\ndocx_parser: python-docx\n"
    )


def _golden_yaml(name: str, value: str) -> str:
    return (
        "# Your golden set (docs/formats.md): one JSON case per line, evidence as quotes or\n"
        "# offsets. The default golden set in this folder (conf/project/default.yaml). Cases\n"
        "# without a split get one from a hash of their id; holdout_fraction of them go to\n"
        "# the holdout split.\n"
        f"path: {value}\nholdout_fraction: 0.3333333333333333\n"
    )


def project_yaml(name: str) -> str:
    """``conf/project/default.yaml``: the project's corpus and golden set as the defaults
    of every command run in the project (an optional entry of ragsweep's defaults list)."""
    return (
        "# @package _global_\n"
        "# This project's defaults: every ragsweep command run in this folder uses its corpus\n"
        "# and golden set (a command-line corpus=/golden= still wins). Without this file,\n"
        "# ragsweep uses its bundled demo data. More `override /GROUP: OPTION` lines may\n"
        "# follow (e.g. `- override /chunking: heading`), and values after the list\n"
        "# (e.g. `chunking: {size: 400}`) replace the packaged defaults too.\n"
        f"defaults:\n  - override /corpus: {name}\n  - override /golden: {name}\n"
    )


def _sweep_yaml(name: str) -> str:
    return f"""\
# One axis at a time on your data: `ragsweep -m sweep={name}` (format: docs/sweeps.md).
description: Chunking and normalization for BM25 on the {name} corpus.

# Overrides every job starts from; the command line can add more.
# (The corpus and golden set are the project's defaults: conf/project/default.yaml.)
baseline:
  embedding: bm25

# In order; each axis keeps the best value so far. The split mode is swept with size and
# overlap held (the chunking options also set other sizes: more than one factor).
axes:
  - chunking.mode: [fixed, paragraph, heading]
  - preprocess: [none, nfkc]
  - chunking.size: [400, 800, 1200]
  - chunking.overlap: [0, 100, 200]

# A context budget, not a fixed k: chunk size changes how much text k chunks hold
# (docs/metrics.md).
objective: recall_at_2000c
# Keep the current value unless another one beats it by more than this (absolute).
min_improvement: 0.01
"""


def _readme(
    name: str, corpus: Path, golden: Path, template: Path, examples: bool, retriever: bool
) -> str:
    questions = (
        f"Replace the example cases in `{golden.name}` with your questions"
        if template == golden
        else f"Write your questions into `{golden}`, starting from the examples in "
        f"`{template.name}`"
    )
    docs = (
        f"- `{corpus.name}/example.md`, `{corpus.name}/faq.md`: example documents; replace "
        "them with yours.\n"
        if examples
        else ""
    )
    example = (
        f"- `{EXAMPLE_RETRIEVER_FILE}`: an example retriever class of your own; run it with\n"
        f"  `{EXAMPLE_RETRIEVER_COMMAND}`.\n"
        if retriever
        else ""
    )
    return f"""\
# {name}: retrieval evaluation with ragsweep

Written by `ragsweep init`. Run every command from this folder: it uses your corpus and
golden set by default, its Python files can be named by `_target_`, and outputs (runs,
MLflow store, caches) go to `outputs/` here.

- `conf/corpus/{name}.yaml`: where your documents are ({corpus}).
- `conf/golden/{name}.yaml`: where your golden set is ({golden}).
- `conf/{PROJECT_GROUP}/{PROJECT_OPTION}.yaml`: makes those two the defaults here (without
  it, ragsweep uses its bundled demo data).
- `sweeps/{name}.yaml`: a one-axis sweep over chunking and preprocessing.
- `{template.name}`: golden-set template, one example per evidence form.
{docs}{example}
## Next steps

1. Put your documents in `{corpus}` (or edit `conf/corpus/{name}.yaml`).
2. {questions}.
   For each question, quote the passage that answers it (the format is in ragsweep's
   docs/formats.md).
3. Check everything without running anything:

       ragsweep check sweep={name}

4. Evaluate one configuration, then sweep:

       ragsweep
       ragsweep -m sweep={name}

5. See which configuration won, and compare the runs in the MLflow UI:

       ragsweep best
       ragsweep ui

A file under `conf/` adds an option to ragsweep's defaults or replaces the one with the
same group and name (e.g. `conf/eval/default.yaml`). This prints the composed config:

    ragsweep --cfg job
"""


def example_retriever() -> StarterFile:
    """The example retriever class (``--example retriever``)."""
    source = resources.files(__package__ or "ragsweep.cli") / EXAMPLE_RETRIEVER_SOURCE
    return StarterFile(EXAMPLE_RETRIEVER_FILE, source.read_text(encoding="utf-8"))


def plan(
    project: Path,
    name: str,
    corpus: str | None = None,
    golden: str | None = None,
    retriever: bool = False,
) -> list[StarterFile]:
    """The files ``ragsweep init`` writes into ``project`` (absolute), relative to it."""
    corpus_value, corpus_path = _config_path(project, corpus, DEFAULT_CORPUS)
    golden_value, golden_path = _config_path(project, golden, DEFAULT_GOLDEN)
    template = golden_path if not golden_path.exists() else project / TEMPLATE_BESIDE
    examples = not corpus_path.exists() and corpus_path.suffix.lower() != ".jsonl"
    files = [
        StarterFile(Path("conf/corpus") / f"{name}.yaml", _corpus_yaml(name, corpus_value)),
        StarterFile(Path("conf/golden") / f"{name}.yaml", _golden_yaml(name, golden_value)),
        StarterFile(project_defaults_file(Path()), project_yaml(name)),
        StarterFile(Path("sweeps") / f"{name}.yaml", _sweep_yaml(name)),
        StarterFile(
            Path("README.md"),
            _readme(name, corpus_path, golden_path, template, examples, retriever),
        ),
        StarterFile(_relative(template, project), _jsonl(golden_template())),
        *([example_retriever()] if retriever else []),
    ]
    if examples:
        files += [
            StarterFile(_relative(corpus_path / doc, project), text)
            for doc, text in EXAMPLE_DOCS.items()
        ]
    return files


def _relative(path: Path, project: Path) -> Path:
    """``path`` relative to ``project`` when inside it (else absolute: outside the project)."""
    try:
        return path.relative_to(project)
    except ValueError:
        return path


def check_name(name: str) -> str | None:
    """Why ``name`` cannot name the project's config options, or None."""
    if not _NAME.match(name):
        return f"--name {name!r}: use letters, digits, '-' and '_', starting with a letter"
    taken = [g for g in ("corpus", "golden") if (config_dir() / g / f"{name}.yaml").exists()]
    if taken:
        return (
            f"--name {name!r}: ragsweep ships a {' and a '.join(taken)} option of that name "
            "(yours would replace it); choose another name"
        )
    return None


def write(project: Path, files: Sequence[StarterFile]) -> list[Path]:
    """Write ``files`` under ``project``; refuse (FileExistsError naming every existing
    file) before writing anything if any of them exists."""
    targets = [project / f.path for f in files]
    existing = [t for t in targets if t.exists()]
    if existing:
        listed = "\n  ".join(str(t) for t in existing)
        raise FileExistsError(f"these files exist already, nothing was written:\n  {listed}")
    for target, starter in zip(targets, files, strict=True):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(starter.text, encoding="utf-8")
    return targets


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragsweep init", description="Write a starter ragsweep project (never overwrites)."
    )
    parser.add_argument("dir", nargs="?", default=".", help="project folder (default: .)")
    parser.add_argument(
        "--name", default=DEFAULT_NAME, help="name of the corpus/golden/sweep options"
    )
    parser.add_argument(
        "--corpus",
        help=f"your documents: a folder or a .jsonl file (default: DIR/{DEFAULT_CORPUS})",
    )
    parser.add_argument("--golden", help=f"your golden set (default: DIR/{DEFAULT_GOLDEN})")
    parser.add_argument(
        "--example",
        choices=[RETRIEVER_EXAMPLE],
        help=f"also write an example retriever class ({EXAMPLE_RETRIEVER_FILE}); in a "
        "project that exists already, write only that",
    )
    return parser


def next_steps(project: Path, name: str, retriever: bool) -> str:
    """What to run next, printed after the files written."""
    commands = [
        (f"ragsweep check sweep={name}", "validate everything, run nothing"),
        ("ragsweep", "one run on your documents"),
        (f"ragsweep -m sweep={name}", "one axis at a time"),
        ("ragsweep best", "the configuration the sweep chose"),
        ("ragsweep ui", "compare the runs in the MLflow UI"),
        ("ragsweep label", "write your golden set in the browser (docs/golden.md)"),
    ]
    width = max(len(command) for command, _ in commands)
    lines = [_next_line(project), *(f"  {c:<{width}}   {what}" for c, what in commands)]
    if retriever:
        lines.append(f"  {EXAMPLE_RETRIEVER_COMMAND}")
    return "\n".join([*lines, "(see README.md)"])


def _next_line(project: Path) -> str:
    """``next: cd PROJECT`` (``next, in this folder:`` when already there)."""
    return "next, in this folder:" if project == Path.cwd().resolve() else f"next: cd {project}"


def main(argv: Sequence[str]) -> int:
    """``ragsweep init``: exit status 0, or 2 when the name is unusable or a file exists."""
    args = build_parser().parse_args(list(argv))
    problem = check_name(args.name)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    project = Path(args.dir).expanduser().resolve()
    retriever = args.example == RETRIEVER_EXAMPLE
    only_example = retriever and project_defaults_file(project).exists()
    files = (
        [example_retriever()]
        if only_example
        else plan(project, args.name, args.corpus, args.golden, retriever)
    )
    try:
        written = write(project, files)
    except FileExistsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    if only_example:
        print(f"\n{_next_line(project)}\n  {EXAMPLE_RETRIEVER_COMMAND}")
    else:
        print("\n" + next_steps(project, args.name, retriever))
    return 0
