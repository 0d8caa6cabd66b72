"""One job of the ``ragsweep`` Hydra app: validate its config, run the evaluation, print.

:mod:`ragsweep.cli.main` imports this module only when Hydra starts a job, so
``ragsweep --help`` and the read-only subcommands never import the pipeline (and through
it numpy, the backends and the tracking code).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from rich.console import Console

from ragsweep.config.app import plain_config
from ragsweep.core.names import VERBOSE_KEY
from ragsweep.core.terminal import say
from ragsweep.run.config import resolve
from ragsweep.run.names import RunOrigin, launch_origin, result_overrides
from ragsweep.run.objective import JobObjective, RunObjective
from ragsweep.run.pipeline import run_evaluation
from ragsweep.run.report import job_line


def run_from_config(cfg: DictConfig, output_dir: Path, origin: RunOrigin | None = None) -> float:
    """Validate ``cfg``, run one evaluation into ``output_dir``; return the objective.
    ``origin``: how the run was launched (its MLflow name says so)."""
    return run_evaluation(resolve(plain_config(cfg)), output_dir, origin=origin).objective


def run_job(cfg: DictConfig, hydra_cfg: Any) -> float:
    """One Hydra job: a single run prints its summary; a job of ``-m`` (sweep or grid)
    prints one line (:func:`ragsweep.run.report.job_line`), its summary too with
    ``verbose=true`` (``-v``); ``report.md`` in the job's folder holds it either way."""
    origin = launch_origin(hydra_cfg)
    brief = origin.multirun and not cfg.get(VERBOSE_KEY, False)
    resolved = resolve(plain_config(cfg))
    output_dir = Path(hydra_cfg.runtime.output_dir)
    result = run_evaluation(resolved, output_dir, origin=origin, show_summary=not brief)
    if brief:
        overrides = result_overrides(origin.overrides)
        line = job_line(
            hydra_cfg.job.num, overrides, resolved.objective.name, result.summary, output_dir
        )
        say(Console(), line, "", "    ")
    name = resolved.objective.name
    return JobObjective(result.objective, name, RunObjective.of(result.summary, name))
