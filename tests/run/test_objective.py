"""A job's return: its objective as a float for any Hydra sweeper, with the figures a grid's
table shows (ragsweep.run.objective)."""

from __future__ import annotations

import math
import pickle

from ragsweep.run.objective import JobObjective, RunObjective, returned_figures

FIGURES = RunObjective(0.75, 0.7, 0.8, 120, acl_leaks=None)


def test_a_job_objective_is_its_float_and_pickles_with_its_figures() -> None:
    value = JobObjective(0.75, "recall_at_5", FIGURES)
    assert isinstance(value, float) and value == 0.75 and math.isfinite(value)
    back = pickle.loads(pickle.dumps(value))  # a launcher in another process sends it back
    assert isinstance(back, JobObjective) and float(back) == 0.75
    assert back.name == "recall_at_5" and back.figures == FIGURES


def test_figures_are_taken_only_for_the_objective_they_are_of() -> None:
    value = JobObjective(0.75, "recall_at_5", FIGURES)
    assert returned_figures(value, "recall_at_5") == FIGURES
    assert returned_figures(value, "mrr") is None  # another objective: read from the files
    assert returned_figures(0.75, "recall_at_5") is None  # a plain float carries none
