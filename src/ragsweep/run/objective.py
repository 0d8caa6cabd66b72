"""A run's objective as tables show it (mean, 95% interval, ``n``, leaks), and the value a
job returns to Hydra: that objective as a float, carrying those figures.

A grid's table shows each job's objective with its interval (:mod:`ragsweep.sweep.grid`).
The job computed both a moment before, in the same summary its ``report.md`` shows; a job
returns them with its objective (:class:`JobObjective`, a ``float`` for any Hydra sweeper
or callback), so the table does not read the job's ``cases.jsonl`` back and summarize it
again (on SQuAD that was ~0.3 s per job of a ~1 s warm job, bench/README.md, issue 31).
A return without figures (a job run by other code) is recomputed from the job's files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ragsweep.eval.metric_keys import ACL_LEAKS, N_ANSWERABLE
from ragsweep.eval.scoring import Summary


@dataclass(frozen=True)
class RunObjective:
    """A run's objective: its mean over the answerable cases, its interval and ``n``;
    ``acl_leaks`` its total leaks (None without access metadata or when not known)."""

    mean: float
    low: float
    high: float
    n: int
    acl_leaks: float | None = None

    def interval_text(self) -> str:
        return f"[{self.low:.3f}, {self.high:.3f}]"

    @classmethod
    def of(cls, summary: Summary, objective: str) -> RunObjective | None:
        """``objective``'s figures in ``summary`` (None: the summary does not give it)."""
        if objective not in summary.overall or objective not in summary.intervals:
            return None
        bounds = summary.intervals[objective]
        leaks = summary.access.get(ACL_LEAKS) if summary.access else None
        n = summary.counts[N_ANSWERABLE]
        return cls(summary.overall[objective], bounds.low, bounds.high, n, leaks)


class JobObjective(float):
    """What a job returns: its objective, a float, with ``figures`` (:class:`RunObjective`)
    for the objective named ``name`` (module docstring)."""

    name: str
    figures: RunObjective | None

    def __new__(cls, value: float, name: str, figures: RunObjective | None) -> JobObjective:
        made = super().__new__(cls, value)
        made.name, made.figures = name, figures
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled whole (a launcher in another process sends it back)."""
        return (JobObjective, (float(self), self.name, self.figures))


def returned_figures(value: Any, objective: str) -> RunObjective | None:
    """The figures a job returned with its objective when they are ``objective``'s, else
    None (read them from the job's files)."""
    if isinstance(value, JobObjective) and value.name == objective:
        return value.figures
    return None
