"""Where the Hydra config comes from, and how it is turned into plain data.

Library code (promotion, the gate, the sweeper, tests) composes configs through this module
instead of importing the CLI. Nothing happens on import: the ``ragsweep_root`` resolver
used by ``conf/paths`` is registered by :func:`register_resolvers`, which
:func:`compose` and the CLI call.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

ROOT_RESOLVER = "ragsweep_root"


def config_dir() -> Path:
    """The Hydra config directory: ``$RAGSWEEP_CONF_DIR`` if set, else the ``conf/``
    folder of the source tree this package was installed from (editable install)."""
    if os.environ.get("RAGSWEEP_CONF_DIR"):
        return Path(os.environ["RAGSWEEP_CONF_DIR"]).resolve()
    return Path(__file__).resolve().parents[2] / "conf"


def project_root() -> str:
    """``$RAGSWEEP_ROOT`` or the folder holding the config directory (the repo root)."""
    return os.environ.get("RAGSWEEP_ROOT") or str(config_dir().parent)


def register_resolvers() -> None:
    """Register the ``${ragsweep_root:}`` resolver (once per process)."""
    if not OmegaConf.has_resolver(ROOT_RESOLVER):
        OmegaConf.register_new_resolver(ROOT_RESOLVER, project_root)


def plain_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as plain data, without Hydra's own node."""
    register_resolvers()
    container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    return cast(dict[str, Any], container)


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> DictConfig:
    """Compose the config as ``ragsweep OVERRIDES...`` would, outside a Hydra app."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register_resolvers()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=list(overrides))
