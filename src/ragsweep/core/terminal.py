"""Text that fits the terminal: wrapped lines and tables split into column groups.

Everything ragsweep prints must stay readable when captured at 80 columns (a pipe, a CI
log: rich then assumes 80) and must never cut a number. Lines are wrapped only at spaces
that do not sit inside a figure's notation (an interval ``[-0.265, -0.116]``, ``p = 0.004``,
``Δ +0.3616``); tables too wide for the width are split into several tables over groups
of columns, each repeating the first (label) column.
"""

from __future__ import annotations

import logging
import math
import re
import shutil
import textwrap
from collections.abc import Sequence

from rich.console import Console

DEFAULT_WIDTH = 80
"""Columns assumed when the output is not a terminal (rich does the same)."""

MARKDOWN_WIDTH = 80
"""Width of the Markdown documents ragsweep prints and logs (``comparison.md``,
``promotion.md``, golden stats): fixed, so the logged file does not depend on the terminal
of whoever produced it."""

_NO_BREAK = "\u00a0"
# Spans whose inner spaces must not become line breaks: bracketed intervals, "p = 0.004",
# a Δ with its number, and a number with its unit ("~0.5 s", "12 ms").
_GLUED = re.compile(
    r"\[[^\]\n]*\]|\S+ = \S+|Δ [-+]?\d\S*|[~≈]?[-+]?\d[\d.,]* (?:s|ms|MB|kB|KB|B|%)(?!\w)"
)


def terminal_width() -> int:
    """Columns of the terminal on stdout, ``$COLUMNS`` when set, else :data:`DEFAULT_WIDTH`."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def wrap(text: str, width: int, indent: str = "", hanging: str = "  ") -> list[str]:
    """``text`` as lines of at most ``width`` columns: the first starts with ``indent``, the
    rest with ``indent + hanging``. Breaks only at spaces outside figures (module
    docstring); a single word longer than the width stays whole on its own line."""
    return _wrap(text, width, indent, indent + hanging)


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """:func:`wrap` with the first line's and the other lines' indents given apart."""
    glued = _GLUED.sub(lambda m: m.group(0).replace(" ", _NO_BREAK), text)
    lines = textwrap.wrap(
        glued,
        width=max(width, len(first) + 1, len(rest) + 1),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return [line.replace(_NO_BREAK, " ") for line in lines] or [first.rstrip()]


def column_groups(first: int, widths: Sequence[int], available: int, gap: int) -> list[range]:
    """Split columns of ``widths`` (beside a first column of ``first`` characters, every
    column ``gap`` characters from the previous one) into as few groups as fit in
    ``available`` columns, of near-equal size and in order. A column too wide even alone
    gets a group of its own."""
    per_group = _most_per_group(first, widths, available, gap)
    groups = math.ceil(len(widths) / per_group) if widths else 1
    size = math.ceil(len(widths) / groups) if widths else 0
    while groups > 1 and not _all_fit(first, widths, size, available, gap):
        size -= 1  # balanced groups can be wider than greedy ones: fall back step by step
    size = max(size, 1)
    return [range(start, min(start + size, len(widths))) for start in range(0, len(widths), size)]


def _most_per_group(first: int, widths: Sequence[int], available: int, gap: int) -> int:
    """The largest n such that every run of n consecutive columns fits (at least 1)."""
    for n in range(len(widths), 0, -1):
        if _all_fit(first, widths, n, available, gap):
            return n
    return 1


def _all_fit(first: int, widths: Sequence[int], n: int, available: int, gap: int) -> bool:
    return all(
        first + sum(w + gap for w in widths[start : start + n]) <= available
        for start in range(0, len(widths), n)
    )


def command_lines(command: str, width: int, indent: str = "", hanging: str = "    ") -> list[str]:
    """A shell command as lines of at most ``width`` columns that still paste as one
    command: every line but the last ends with `` \\``; breaks only between arguments."""
    lines = wrap(command, width - 2, indent, hanging)
    return [line + " \\" for line in lines[:-1]] + lines[-1:]


def say(
    console: Console, text: str, indent: str = "", hanging: str = "  ", style: str = ""
) -> None:
    """Print ``text`` (plain, no markup) wrapped to ``console``'s width (:func:`wrap`);
    each line of ``text`` is wrapped on its own."""
    for paragraph in text.splitlines() or [""]:
        lead = indent + paragraph[: len(paragraph) - len(paragraph.lstrip())]
        for line in wrap(paragraph.lstrip(), console.width, lead, hanging):
            console.print(line, markup=False, style=style or None, highlight=False, soft_wrap=True)


class WrappingFormatter(logging.Formatter):
    """A log formatter whose records are wrapped to the terminal's width (:func:`wrap`,
    continuation lines indented by four spaces). Hydra's own messages use it
    (``hydra.hydra_logging`` in the packaged config), so its launcher's job lines (the
    overrides of every job) do not run past 80 columns in a captured log."""

    def __init__(self, format: str | None = None, datefmt: str | None = None) -> None:
        super().__init__(fmt=format, datefmt=datefmt)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record).expandtabs(4)
        width = terminal_width()
        return "\n".join(
            "\n".join(wrap(line, width, "", "    ")) if len(line) > width else line
            for line in text.splitlines()
        )


_LIST_ITEM = re.compile(r"^(\s*)([-*]|\d+\.) ")


def fit_markdown(text: str, width: int = MARKDOWN_WIDTH) -> str:
    """``text`` (Markdown) with every prose line longer than ``width`` wrapped: list
    items continue under their text, paragraphs as paragraphs. Headings, table rows and
    fenced code are left as they are (split wide tables with
    :func:`ragsweep.run.report.markdown_tables` and keep headings short)."""
    out: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        if fenced or len(line) <= width or line.lstrip().startswith(("#", "|", "```")):
            out.append(line)
            continue
        item = _LIST_ITEM.match(line)
        lead = item.group(0) if item else line[: len(line) - len(line.lstrip())]
        out += _wrap(line[len(lead) :], width, lead, " " * len(lead))
    return "\n".join(out)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown (GFM) table; cells are used as given."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)
