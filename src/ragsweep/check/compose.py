"""Composing configs for ``ragsweep check``, finding every bad override in one pass.

Hydra stops at the first override it cannot apply; :meth:`Composer.compose_all` checks each
override against the config composed without them (a config group's options, a key that
exists), reports all that fail with a did-you-mean, and composes the rest.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException

from ragsweep.check.problems import Problem, first_line
from ragsweep.config.app import (
    CONFIG_MODULE,
    CONFIG_NAME,
    config_dir,
    override_config_dirs,
    plain_config,
    register_resolvers,
)
from ragsweep.core.registry import did_you_mean

COMMAND_LINE = "command line"
COMPOSE_ERRORS = (HydraException, OmegaConfBaseException)
_ABSENT = object()


def task_config(cfg: DictConfig) -> dict[str, Any]:
    """A config composed with its ``hydra`` node, resolved as plain data without it."""
    task = copy.deepcopy(cfg)
    with read_write(task), open_dict(task):
        task.pop("hydra", None)
    return plain_config(task)


def override_key(line: str) -> str:
    """The key (or config group) an override line sets, ``""`` if it does not parse."""
    try:
        return str(OverridesParser.create().parse_overrides([line])[0].key_or_group)
    except COMPOSE_ERRORS:
        return ""


class Composer:
    """Composes ragsweep configs (packaged defaults and the project's config folders)."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.parser = OverridesParser.create()

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """The config ``ragsweep OVERRIDES`` would run, ``hydra`` node included."""
        return hydra_compose(CONFIG_NAME, list(overrides), return_hydra_config=True)

    def options(self, group: str) -> list[str]:
        """The options of a config group, from every config folder."""
        return list(self.loader.get_group_options(group))

    def source(self, group: str, option: str) -> Path | None:
        """The file that defines ``group/option`` (the first config folder that has it)."""
        for folder in [*override_config_dirs(), config_dir()]:
            path = folder / group / f"{option}.yaml"
            if path.is_file():
                return path
        return None

    def compose_all(self, overrides: Sequence[str]) -> tuple[DictConfig | None, list[Problem]]:
        """The config with every valid override applied, and a problem for each other one."""
        try:
            base = self.compose([])
        except COMPOSE_ERRORS as exc:
            return None, [Problem("config", first_line(exc))]
        problems = {line: self.override_problem(base, line) for line in overrides}
        found = [p for p in problems.values() if p is not None]
        good = [line for line, problem in problems.items() if problem is None]
        try:
            return self.compose(good), found
        except COMPOSE_ERRORS as exc:
            return None, [*found, Problem(COMMAND_LINE, first_line(exc))]

    def override_problem(self, base: DictConfig, line: str) -> Problem | None:
        """Why ``line`` cannot be applied to ``base``, or None."""
        try:
            override = self.parser.parse_overrides([line])[0]
        except COMPOSE_ERRORS as exc:
            return Problem(COMMAND_LINE, f"{line}: not an override KEY=VALUE ({first_line(exc)})")
        if override.is_sweep_override():
            return Problem(
                COMMAND_LINE, f"{line}: one value per key (sweep values go in a sweep file)"
            )
        if override.key_or_group in base.hydra.runtime.choices:
            return self._option_problem(override, line)
        if override.is_add() or override.is_force_add() or line.startswith("hydra"):
            return None
        return self._key_problem(base, override.key_or_group, line)

    def _option_problem(self, override: Override, line: str) -> Problem | None:
        group, value = override.key_or_group, override.value()
        options = self.options(group)
        if not isinstance(value, str) or value in options:
            return None
        return Problem(
            COMMAND_LINE,
            f"{line}: no option {value!r} in config group {group} "
            f"(options: {', '.join(options)}){did_you_mean(value, options)}",
        )

    def _key_problem(self, base: DictConfig, key: str, line: str) -> Problem | None:
        if OmegaConf.select(base, key, default=_ABSENT) is not _ABSENT:
            return None
        parent, missing, keys = _first_missing(base, key)
        where = f" (keys of {parent or 'the config'}: {', '.join(keys)})" if keys else ""
        return Problem(
            COMMAND_LINE,
            f"{line}: {key} is not a config key{where}{did_you_mean(missing, keys)}",
        )


def _first_missing(cfg: DictConfig, key: str) -> tuple[str, str, list[str]]:
    """``(existing prefix, first missing part, keys at the prefix)`` of a dotted key."""
    node: Any = cfg
    done: list[str] = []
    for part in key.split("."):
        if not isinstance(node, DictConfig):
            return ".".join(done), part, []
        if part not in node:
            return ".".join(done), part, [str(k) for k in node if k != "hydra"]
        node = node[part]
        done.append(part)
    return ".".join(done), "", []


@contextmanager
def composer() -> Iterator[Composer]:
    """A :class:`Composer` inside an initialized Hydra (the project's folders included)."""
    register_resolvers()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        yield Composer(GlobalHydra.instance().config_loader())
