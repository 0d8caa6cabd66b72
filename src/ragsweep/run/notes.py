"""Run descriptions: the Markdown MLflow shows on a run's page (tag ``mlflow.note.content``).

A run describes itself (:func:`run_note`): a line summarising its config and a line with its
objective, interval and number of cases. A sweep replaces its children's descriptions once
an axis is decided and writes the parent's (:mod:`ragsweep.sweep.notes`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ragsweep.eval.metric_keys import N_ANSWERABLE
from ragsweep.eval.uncertainty import interval_keys
from ragsweep.run.config import ResolvedConfig, RunConfig
from ragsweep.run.describe import describe

SUMMARY = (
    "**chunking** {mode}, size {size}, overlap {overlap} · "
    "**preprocess** {preprocess} ({steps}) · "
    "**embedding** {backend}{model_code} · **top_k** {top_k} · "
    "**split** {split}"
)
"""The config line of a run's description (:func:`config_summary`)."""


def config_summary(cfg: RunConfig) -> str:
    """One Markdown line: chunking, preprocessing, embedding, retrieval depth and split."""
    return describe(cfg, SUMMARY, no_steps="no steps")


def objective_line(name: str, metrics: Mapping[str, float]) -> str:
    """``**recall_at_5** = 0.7234 [0.6990, 0.7480] over 281 answerable cases``; what is
    known of it when a figure is missing."""
    if name not in metrics:
        return f"**{name}**: not measured"
    low, high = interval_keys(name)
    interval = f" [{metrics[low]:.4f}, {metrics[high]:.4f}]" if low in metrics else ""
    n = metrics.get(N_ANSWERABLE)
    cases = f" over {int(n)} answerable cases" if n is not None else ""
    return f"**{name}** = {metrics[name]:.4f}{interval}{cases}"


def run_note(resolved: ResolvedConfig, metrics: Mapping[str, float]) -> str:
    """A run's own description (module docstring)."""
    return "\n\n".join(
        [config_summary(resolved.cfg), objective_line(resolved.objective.name, metrics)]
    )
