"""A sweep's job configs, composed as the launcher will compose them: the fixed overrides
(the sweep file's baseline, then the command line), and each job's config composed from
them, validated and hashed (:class:`Composed`) before anything is launched; the launcher
then runs the config composed here (:mod:`ragsweep.sweep.reuse`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from ragsweep.config.app import plain_config
from ragsweep.core.errors import ConfigError, RagsweepError
from ragsweep.run.config import resolve
from ragsweep.sweep.factors import result_values
from ragsweep.sweep.reuse import ReusingLoader
from ragsweep.sweep.spec import Axis, Point, SweepSpec, override_text

_ABSENT = object()


@dataclass(frozen=True)
class Composed:
    """A job's config as the launcher will compose it: validated and hashed, or ``error``.
    ``values``: its result-affecting values by key (:func:`factors.result_values`)."""

    lines: tuple[str, ...]
    resolved: dict[str, Any] | None = None
    config_hash: str | None = None
    choices: Mapping[str, str] | None = None
    error: str | None = None
    values: Mapping[str, Any] | None = None

    def value_of(self, key: str) -> str:
        """``key``'s current value as override text (a config group's chosen option)."""
        assert self.resolved is not None and self.choices is not None
        if key in self.choices:
            return str(self.choices[key])
        value = OmegaConf.select(OmegaConf.create(self.resolved), key)
        try:
            return override_text(value)
        except (TypeError, ValueError):
            return str(value)

    def has_key(self, key: str) -> bool:
        """Whether ``key`` is a config group or a key of this configuration."""
        assert self.resolved is not None and self.choices is not None
        config = OmegaConf.create(self.resolved)
        return key in self.choices or OmegaConf.select(config, key, default=_ABSENT) is not _ABSENT

    def point_of(self, axis: Axis) -> Point:
        """This configuration's own values of the axis keys, as a point of the axis."""
        return Point(tuple((key, self.value_of(key)) for key in axis.keys))


class Composer:
    """Composes the job configs of one sweep: ``config`` is the sweeper's (primary) config,
    ``loader`` Hydra's config loader (which keeps each config for the launcher),
    ``arguments`` the command line's overrides."""

    def __init__(
        self, loader: ReusingLoader, config: DictConfig, spec: SweepSpec, arguments: list[str]
    ) -> None:
        self.loader = loader
        self.config = config
        self.spec = spec
        self.command_line = self._command_line(arguments)
        self.fixed = {key: f"{key}={text}" for key, text in spec.baseline} | self.command_line
        """Baseline of the file, then the command line (which wins), as key → override."""

    def _command_line(self, arguments: list[str]) -> dict[str, str]:
        """The command line's overrides by key; grid values and the objective refused."""
        fixed: dict[str, str] = {}
        parser = OverridesParser.create(config_loader=self.loader)
        for override in parser.parse_overrides(arguments):
            if override.is_sweep_override():
                raise ConfigError(
                    f"{override.input_line}: a one-axis sweep takes its values from "
                    f"{self.spec.path}; put the values in an axis there"
                )
            if override.key_or_group == "eval.objective":
                raise ConfigError(
                    f"{override.input_line}: the objective comes from the sweep file "
                    f"(objective: {self.spec.objective}); change it there"
                )
            fixed[override.get_key_element()] = str(override.input_line)
        return fixed

    def compose(self, overrides: Mapping[str, str], extra: Sequence[str] = ()) -> Composed:
        """Compose, validate and hash the job config the launcher would build."""
        lines = (*overrides.values(), f"eval.objective={self.spec.objective}", *extra)
        try:
            cfg = self.loader.compose(self.config, list(lines))
            choices = dict(cfg.hydra.runtime.choices)
            task = copy.deepcopy(cfg)
            with read_write(task), open_dict(task):
                del task["hydra"]
            resolved = plain_config(task)
            run = resolve(resolved)
            values = result_values(run)
        except (RagsweepError, HydraException, OmegaConfBaseException) as exc:
            return Composed(lines, error=_first_line(exc))
        return Composed(lines, resolved, run.config_hash, choices, values=values)

    def group_options(self, group: str) -> list[str]:
        """The options of config group ``group``."""
        return list(self.loader.get_group_options(group))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
