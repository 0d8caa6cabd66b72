"""The implementation behind the ``hydra/sweeper=one_axis`` plugin
(``hydra_plugins.ragsweep_one_axis``): with ``sweep=NAME``, the sweep file is run one axis at
a time (:class:`ragsweep.sweep.engine.SweepRun`); without it, the command-line arguments are
a grid, run by Hydra's basic sweeper, which ends with a table of its configurations, best
first (:mod:`ragsweep.sweep.grid`). Either way the jobs' runs go to the sweep's logger.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig
from rich.console import Console

from ragsweep.config.app import sweep_dirs, tracking_settings
from ragsweep.core.errors import RagsweepError
from ragsweep.sweep.engine import SweepRun
from ragsweep.sweep.grid import conclude_grid
from ragsweep.sweep.reuse import ReusingLoader
from ragsweep.sweep.spec import SweepFile, SweepSpec, load_sweep, resolve_sweep_path
from ragsweep.tracking.background import logging_jobs


class OneAxisSweeperImpl:
    """See module docstring; the constructor takes the ``hydra/sweeper=one_axis`` config."""

    def __init__(
        self,
        sweep: str | None,
        sweeps_dir: str,
        resume: bool,
        max_batch_size: int | None,
        params: Mapping[str, str] | None,
    ) -> None:
        self.sweep_name = sweep
        self.sweeps_dir = Path(sweeps_dir)
        self.resume = resume
        self.max_batch_size = max_batch_size
        self.params = params
        self.console = Console()  # messages are wrapped to its width (ragsweep.core.terminal)
        self.grid: BasicSweeper | None = None
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None
        self.loader: ReusingLoader | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.loader = ReusingLoader(hydra_context.config_loader)  # each job composed once
        context = HydraContext(self.loader, hydra_context.callbacks)
        if not self.sweep_name:
            self.grid = BasicSweeper(self.max_batch_size, dict(self.params or {}))
            self.grid.setup(hydra_context=context, task_function=task_function, config=config)
            return
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        """Run the sweep file named by ``sweep=NAME`` (or the grid in ``arguments``).

        A ``RagsweepError`` (bad sweep file, every value of an axis failed) ends the process
        like the ``ragsweep`` app does: ``error: ...`` on stderr, exit status 2.
        """
        assert self.config is not None
        if self.grid is not None:
            # the command line's settings, checked before the grid by PrepareTrackingStore
            with logging_jobs(tracking_settings(self.config), self.config.hydra):
                returns = self.grid.sweep(arguments)
            self._conclude_grid(returns)
            return returns
        assert self.sweep_name
        try:
            spec = load_sweep(resolve_sweep_path(self.sweep_name, sweep_dirs(self.sweeps_dir)))
            return self._sweep_run(spec, arguments).run()
        except RagsweepError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)

    def _conclude_grid(self, returns: Any) -> None:
        """The grid's table (:mod:`ragsweep.sweep.grid`), from its batches of job returns."""
        assert self.config is not None
        jobs = [ret for batch in returns or [] for ret in batch]
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        conclude_grid(jobs, SweepFile.objective, sweep_dir, self.console)

    def _sweep_run(self, spec: SweepSpec, arguments: list[str]) -> SweepRun:
        assert self.config is not None and self.loader is not None
        assert self.launcher is not None
        return SweepRun(
            self.loader,
            self.config,
            self.launcher,
            spec,
            arguments,
            self.resume,
            self.max_batch_size,
            self.console,
        )
