"""``OneAxisSweeper``: sweep one axis at a time, keep the best value, move to the next.

A thin public class (what Hydra discovers and instantiates); the work is done in
:mod:`ragsweep.sweep.sweeper`, imported only when the sweeper is instantiated: Hydra imports
every module under ``hydra_plugins`` when any Hydra app starts, and the sweep engine
(tracking, data loading, reports) would add about 0.7 s to each of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from .config import OneAxisSweeperConf

__all__ = ["OneAxisSweeper", "OneAxisSweeperConf"]


class OneAxisSweeper(Sweeper):
    """Hydra sweeper running a ragsweep sweep file one axis at a time (docs/sweeps.md)."""

    def __init__(
        self,
        sweep: str | None,
        sweeps_dir: str,
        resume: bool,
        max_batch_size: int | None,
        params: Mapping[str, str] | None,
    ) -> None:
        from ragsweep.sweep.sweeper import OneAxisSweeperImpl  # see module docstring

        self.sweeper = OneAxisSweeperImpl(sweep, sweeps_dir, resume, max_batch_size, params)

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.sweeper.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        return self.sweeper.sweep(arguments)
