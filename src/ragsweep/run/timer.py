"""Wall-clock and CPU seconds per named stage of a run (logged as ``*_seconds`` metrics,
the stages of :mod:`ragsweep.run.metrics`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Timer:
    """Wall-clock (and CPU) seconds per named stage.

    Stages are exclusive: while a stage runs inside another (the index, loaded on first use
    inside ``eval_seconds``, counts as ``embed_seconds``), the outer one's clock stops, so
    the stages add up to the run. A stage entered again inside itself is counted once.
    """

    seconds: dict[str, float] = field(default_factory=dict)
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    _open: list[tuple[str, float, float]] = field(default_factory=list, repr=False)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if any(open_name == name for open_name, _, _ in self._open):
            yield
            return
        self._close_top()
        self._open.append((name, time.perf_counter(), time.process_time()))
        try:
            yield
        finally:
            self._close_top()
            self._open.pop()
            if self._open:  # the outer stage's clock runs again
                outer = self._open[-1][0]
                self._open[-1] = (outer, time.perf_counter(), time.process_time())

    def _close_top(self) -> None:
        """Add the time of the innermost open stage since its clock last started."""
        if not self._open:
            return
        name, wall, cpu = self._open[-1]
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - wall
        self.cpu_seconds[name] = self.cpu_seconds.get(name, 0.0) + time.process_time() - cpu
        self._open[-1] = (name, time.perf_counter(), time.process_time())
