"""Progress bars for long stages (chunking, embedding, search), on stderr via rich.

Bars are shown only when the work is long enough to be worth watching and stderr is a
terminal; in logs and CI nothing is drawn.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

_CONSOLE = Console(stderr=True)
MIN_ITEMS_FOR_BAR = 200


class Advance(Protocol):
    def __call__(self, n: int) -> None: ...


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Advance]:
    """Yield ``advance(n)``; draws a bar when ``total`` is large and stderr is a terminal."""
    enabled = total >= MIN_ITEMS_FOR_BAR and sys.stderr.isatty()
    if not enabled:
        yield lambda n: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=_CONSOLE, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
