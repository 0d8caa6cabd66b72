"""Each job of a sweep composed once: the config the sweep composed to check a job is the
one its launcher runs.

Hydra's launchers compose every job's config from its overrides
(``config_loader.load_sweep_config``), and the same config, from the same primary config
and the same overrides, was composed a moment before: by the sweep file's checks, to
validate and hash it (:class:`ragsweep.sweep.compose.Composer`), or, for a plain grid, by
Hydra's basic sweeper, to validate the batch. Each composition of ragsweep's config costs
about 0.2 s of CPU, as much as a warm demo job's own work (bench/README.md, issue 31).
:class:`ReusingLoader` wraps Hydra's config loader and keeps each job config it composes;
the next request for the same config takes the kept one instead of composing it again,
once: a launcher changes the config it runs, so a later request for it (a grid that lists
a value twice) composes afresh, and what Hydra's loader composed for a request after the
first is never kept. The sweep's own checks read a kept config without taking it
(:meth:`ReusingLoader.compose`).
Any other request goes to Hydra's loader. A launcher that runs jobs in other processes
(joblib, Ray, submitit) gets the wrapper without its kept configs, and composes there as
before.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from hydra.core.config_loader import ConfigLoader
from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigSource
from hydra.types import RunMode
from omegaconf import DictConfig

Key = tuple[int, tuple[str, ...]]
"""A job config's key: its master config's id and its overrides."""
KEPT_AT_MOST = 256
"""Configs kept at most (the oldest go first): a sweep keeps those of values it reuses too."""


class ReusingLoader(ConfigLoader):
    """Hydra's config ``loader``, with the job configs the sweep composed (module docstring)."""

    def __init__(self, loader: ConfigLoader) -> None:
        self.loader = loader
        self._kept: OrderedDict[Key, tuple[DictConfig, DictConfig]] = OrderedDict()
        self._asked: set[Key] = set()
        """The configs Hydra has asked for (a second request may come from a launcher that
        changed the first answer: what is composed for it is not kept)."""
        self.reused = 0
        """How many job configs were taken or read instead of composed."""

    def compose(self, master_config: DictConfig, overrides: list[str]) -> DictConfig:
        """A job's config for reading only (the caller must not change it): the kept one,
        else composed by Hydra's loader and kept for the launcher."""
        key = (id(master_config), tuple(overrides))
        kept = self._kept.get(key)
        if kept is not None and kept[0] is master_config:
            self.reused += 1
            return kept[1]
        return self._composed(key, master_config, overrides, keep=True)

    def load_sweep_config(
        self, master_config: DictConfig, sweep_overrides: list[str]
    ) -> DictConfig:
        """Hydra's request for a job's config: the kept one, taken (a launcher may change
        it), else composed and kept for the next request (a grid's launcher after its
        sweeper's validation)."""
        key = (id(master_config), tuple(sweep_overrides))
        kept = self._kept.pop(key, None)
        first = key not in self._asked
        self._asked.add(key)
        if kept is not None and kept[0] is master_config:
            self.reused += 1
            return kept[1]
        return self._composed(key, master_config, sweep_overrides, keep=first)

    def _composed(
        self, key: Key, master_config: DictConfig, overrides: list[str], keep: bool
    ) -> DictConfig:
        cfg = self.loader.load_sweep_config(master_config, overrides)
        if keep:  # with its master: an id may be reused once the master is gone
            self._kept[key] = (master_config, cfg)
            while len(self._kept) > KEPT_AT_MOST:
                self._kept.popitem(last=False)
        return cfg

    def __getstate__(self) -> dict[str, Any]:
        """Sent to other processes without the kept configs (they compose their own)."""
        return {"loader": self.loader, "_kept": OrderedDict(), "_asked": set(), "reused": 0}

    # -- the rest of Hydra's ConfigLoader, as Hydra's loader does it ---------------------------

    def load_configuration(
        self,
        config_name: str | None,
        overrides: list[str],
        run_mode: RunMode,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> DictConfig:
        return self.loader.load_configuration(
            config_name, overrides, run_mode, from_shell, validate_sweep_overrides
        )

    def get_search_path(self) -> ConfigSearchPath:
        return self.loader.get_search_path()

    def get_sources(self) -> list[ConfigSource]:
        return self.loader.get_sources()

    def list_groups(self, parent_name: str) -> list[str]:
        return self.loader.list_groups(parent_name)

    def get_group_options(
        self,
        group_name: str,
        results_filter: ObjectType | None = ObjectType.CONFIG,
        config_name: str | None = None,
        overrides: list[str] | None = None,
    ) -> list[str]:
        return self.loader.get_group_options(group_name, results_filter, config_name, overrides)

    def compute_defaults_list(
        self, config_name: str | None, overrides: list[str], run_mode: RunMode
    ) -> Any:
        return self.loader.compute_defaults_list(config_name, overrides, run_mode)
