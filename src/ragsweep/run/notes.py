"""Run descriptions: the Markdown MLflow shows on a run's page (tag ``mlflow.note.content``).

A run describes itself (:func:`run_note`): a line summarising its config and a line with its
objective, interval and number of cases. A sweep replaces its children's descriptions once
an axis is decided and writes the parent's (:mod:`ragsweep.sweep.notes`).
"""

from __future__ import annotations

from collections.abc import Mapping

from ragsweep.eval.uncertainty import interval_keys
from ragsweep.run.config import ResolvedConfig, RunConfig


def config_summary(cfg: RunConfig) -> str:
    """One Markdown line: chunking, preprocessing, embedding, retrieval depth and split."""
    c = cfg.chunking
    model = f" `{cfg.embedding.model}`" if cfg.embedding.model else ""
    steps = "+".join(cfg.preprocess.steps) or "no steps"
    return (
        f"**chunking** {c.mode}, size {c.size}, overlap {c.overlap} · "
        f"**preprocess** {cfg.preprocess.name} ({steps}) · "
        f"**embedding** {cfg.embedding.backend}{model} · **top_k** {cfg.top_k} · "
        f"**split** {cfg.eval.split}"
    )


def objective_line(name: str, metrics: Mapping[str, float]) -> str:
    """``**recall_at_5** = 0.7234 [0.6990, 0.7480] over 281 answerable cases``; what is
    known of it when a figure is missing."""
    if name not in metrics:
        return f"**{name}**: not measured"
    low, high = interval_keys(name)
    interval = f" [{metrics[low]:.4f}, {metrics[high]:.4f}]" if low in metrics else ""
    n = metrics.get("n_answerable")
    cases = f" over {int(n)} answerable cases" if n is not None else ""
    return f"**{name}** = {metrics[name]:.4f}{interval}{cases}"


def run_note(resolved: ResolvedConfig, metrics: Mapping[str, float]) -> str:
    """A run's own description (module docstring)."""
    return "\n\n".join(
        [config_summary(resolved.cfg), objective_line(resolved.objective.name, metrics)]
    )
