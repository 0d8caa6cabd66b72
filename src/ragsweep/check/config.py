"""The composed config for ``ragsweep check``: each config group validated on its own (so
one bad group does not hide another), then the whole run config resolved as a run would
resolve it. Problems name the file and line that set the key, or the command line."""

from __future__ import annotations

import re
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from ragsweep.check.compose import COMMAND_LINE, Composer, override_key, task_config
from ragsweep.check.problems import Problem, first_line, located
from ragsweep.config.schema import from_mapping
from ragsweep.core.errors import RagsweepError
from ragsweep.run.config import ResolvedConfig, RunConfig, group_names, resolve

OPTIONAL_GROUPS = ("judge",)  # absent means off (RunConfig.from_container)
_KEY = re.compile(r"^([A-Za-z_]\w*)((?:\.\w+)*)")


@dataclass(frozen=True)
class ConfigCheck:
    """``groups``: every group that validated, as its dataclass; ``resolved`` only when all
    did and the run config resolves."""

    data: dict[str, Any] | None
    groups: dict[str, Any] = field(default_factory=dict)
    resolved: ResolvedConfig | None = None
    problems: tuple[Problem, ...] = ()


def check_config(composer: Composer, cfg: DictConfig, overrides: Sequence[str]) -> ConfigCheck:
    """Validate the composed ``cfg`` (see module docstring)."""
    try:
        data = task_config(cfg)
    except (OmegaConfBaseException, RagsweepError) as exc:
        return ConfigCheck(None, problems=(Problem("config", first_line(exc)),))
    hints = typing.get_type_hints(RunConfig)
    groups: dict[str, Any] = {}
    problems: list[Problem] = []
    for name in group_names():
        if name not in data and name not in OPTIONAL_GROUPS:
            problems.append(Problem("config", f"config group '{name}' is missing"))
            continue
        try:
            groups[name] = from_mapping(hints[name], data.get(name), name)
        except RagsweepError as exc:
            problems.append(_located(composer, cfg, overrides, str(exc)))
    if problems:
        return ConfigCheck(data, groups, None, tuple(problems))
    try:
        return ConfigCheck(data, groups, resolve(data))
    except RagsweepError as exc:
        return ConfigCheck(data, groups, None, (_located(composer, cfg, overrides, str(exc)),))


def _located(
    composer: Composer, cfg: DictConfig, overrides: Sequence[str], message: str
) -> Problem:
    """A problem about the key a message starts with (``chunking.size=...``), placed where
    that key is set: an override on the command line, else its group's option file."""
    match = _KEY.match(message)
    if not match:
        return Problem("", message)
    group, rest = match.group(1), match.group(2)
    key = group + rest
    keys = {override_key(line) for line in overrides}
    if key in keys:
        return Problem(COMMAND_LINE, message)
    option = cfg.hydra.runtime.choices.get(group)
    source = composer.source(group, str(option)) if option is not None else None
    if source is None:
        return Problem("", message)
    leaf = rest.rsplit(".", 1)[-1] if rest else group
    return Problem(located(source, leaf), message)
