"""Where the Hydra config and the bundled data come from, and how config is turned into
plain data. This module is the only place that knows these locations (docs/install.md).

- **Packaged defaults**: the config groups (``conf/``), the bundled sweep files
  (``sweeps/``) and the demo data (``demo/``) ship inside the package as
  ``ragsweep._data`` (the repository's own folders, read in place by an editable install).
  Hydra reads the defaults as ``pkg://ragsweep._data.conf``.
- **The project**: ``$RAGSWEEP_ROOT``, else the current directory. Its ``conf/`` and any
  ``--config-dir`` (or ``$RAGSWEEP_CONF_DIR``) come before the defaults in Hydra's search
  path (:mod:`hydra_plugins.ragsweep_searchpath`); its ``sweeps/`` before the bundled
  sweeps; outputs go to its ``outputs/``. Its ``conf/project/default.yaml``
  (:func:`project_defaults_file`, written by ``ragsweep init``) is an optional entry of the
  packaged defaults list whose ``override`` lines make the project's corpus and golden set
  the defaults there. Its folder is importable (:func:`import_project`), so a ``_target_``
  can name a class in it.

Library code (promotion, the gate, the sweeper, tests) composes configs through this module
instead of importing the CLI. Nothing happens on import: the ``ragsweep_root`` and
``ragsweep_data`` resolvers used by ``conf/paths`` are registered by
:func:`register_resolvers`, which :func:`compose` and the CLI call.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from ragsweep.config.schema import TrackingConfig, from_mapping
from ragsweep.core.errors import ConfigError

CONFIG_MODULE = "ragsweep._data.conf"
CONFIG_PATH = f"pkg://{CONFIG_MODULE}"
"""The packaged defaults as a Hydra config path (the app's primary config source)."""
CONFIG_NAME = "config"

ROOT_ENV = "RAGSWEEP_ROOT"
CONF_DIRS_ENV = "RAGSWEEP_CONF_DIR"
"""Extra config folders (``os.pathsep``-separated), searched first; ``--config-dir`` sets it."""

PROJECT_GROUP = "project"
PROJECT_OPTION = "default"
"""``conf/config.yaml`` lists ``optional project: default``: a project's
``conf/project/default.yaml`` chooses its own defaults (``override /corpus: NAME``)."""

ROOT_RESOLVER = "ragsweep_root"
DATA_RESOLVER = "ragsweep_data"


def data_dir() -> Path:
    """The folder holding the packaged ``conf/``, ``sweeps/`` and ``demo/``: the
    repository root in an editable install, ``<site-packages>/ragsweep/_data`` in a wheel."""
    return Path(str(resources.files(CONFIG_MODULE))).resolve().parent


def config_dir() -> Path:
    """The packaged config defaults (``conf/``) as a folder."""
    return data_dir() / "conf"


def bundled_sweeps_dir() -> Path:
    """The sweep files that ship with ragsweep (``sweeps/``)."""
    return data_dir() / "sweeps"


BUNDLED_PACKAGE = "ragsweep._data"
"""The package of the files that ship with ragsweep (the label app's page among them)."""


def bundled_dirs() -> list[Path]:
    """The folders of what ships with ragsweep: the config defaults, the bundled sweeps, the
    demo data and the ``ragsweep._data`` package itself (in a wheel, all inside
    site-packages). They are read-only: no command writes there."""
    package = Path(str(resources.files(BUNDLED_PACKAGE))).resolve()
    return [config_dir(), bundled_sweeps_dir(), data_dir() / "demo", package]


def bundled_folder(path: str | Path) -> Path | None:
    """The bundled folder (:func:`bundled_dirs`) ``path`` lies in, or None."""
    target = Path(path).expanduser().resolve()
    return next((f for f in bundled_dirs() if target.is_relative_to(f.resolve())), None)


def refuse_bundled_write(path: str | Path, remedy: str) -> None:
    """ConfigError when ``path``, a file a command is about to write, is part of what ships
    with ragsweep (say the demo golden set, which is every command's default outside a
    project): writing would silently change the installed package. ``remedy`` says what
    to pass instead."""
    folder = bundled_folder(path)
    if folder is None:
        return
    defaults = project_defaults_file()
    why = (
        ""
        if defaults.exists()
        else f"there is no project here ({defaults} does not exist), so the defaults are "
        "the bundled demo data. "
    )
    raise ConfigError(
        f"{path} is part of ragsweep's bundled data ({folder}), which no command changes: "
        f"{why}Run `ragsweep init` in your project folder first (it makes the project's "
        f"corpus and golden set the defaults), or {remedy}"
    )


def project_root() -> str:
    """The project: ``$RAGSWEEP_ROOT``, else the current directory (absolute)."""
    return str(Path(os.environ.get(ROOT_ENV) or os.getcwd()).resolve())


def project_defaults_file(root: Path | None = None) -> Path:
    """The project's defaults (``conf/project/default.yaml``) under ``root`` (by default
    the project): when it exists, its ``override`` lines replace the packaged defaults."""
    folder = Path(project_root()) if root is None else root
    return folder / "conf" / PROJECT_GROUP / f"{PROJECT_OPTION}.yaml"


def import_project() -> str:
    """Make the project's modules importable: its folder goes at the *end* of ``sys.path``
    (once), so ``_target_=retrievers.example.TfidfRetriever`` imports the project's
    ``retrievers/example.py``, while a stray ``yaml.py`` or ``mlflow.py`` among the user's
    files cannot shadow an installed package. Returns the folder."""
    root = project_root()
    if root not in [str(Path(p or ".").resolve()) for p in sys.path]:
        sys.path.append(root)
    return root


def project_sweeps_dir() -> Path:
    """The project's own sweep files, looked up before the bundled ones."""
    return Path(project_root()) / "sweeps"


def override_config_dirs() -> list[Path]:
    """Config folders searched before the packaged defaults, first match first:
    ``$RAGSWEEP_CONF_DIR`` entries (``--config-dir``), then the project's ``conf/``.

    Folders that do not exist are left out, and so is the packaged ``conf/`` itself (the
    repository's, when ragsweep runs from its own checkout).
    """
    listed = [p for p in os.environ.get(CONF_DIRS_ENV, "").split(os.pathsep) if p]
    candidates = [*(Path(p) for p in listed), Path(project_root()) / "conf"]
    packaged = config_dir()
    found: list[Path] = []
    for candidate in candidates:
        folder = candidate.expanduser().resolve()
        if folder.is_dir() and folder != packaged and folder not in found:
            found.append(folder)
    return found


def sweep_dirs(first: Path | None = None) -> list[Path]:
    """Where sweep names are looked up, in order: ``first`` (the sweeper's
    ``sweeps_dir``, by default the project's ``sweeps/``), then the bundled sweeps."""
    dirs = [first if first is not None else project_sweeps_dir(), bundled_sweeps_dir()]
    unique: list[Path] = []
    for folder in dirs:
        if folder.resolve() not in [u.resolve() for u in unique]:
            unique.append(folder)
    return unique


def is_packaged_config(search_path: str) -> bool:
    """Whether a Hydra search path entry is ragsweep's packaged defaults (as
    ``pkg://`` or as the folder itself): the search path plugin acts only then."""
    if search_path.rstrip("/") == CONFIG_PATH:
        return True
    folder = search_path.removeprefix("file://")
    return folder != search_path and Path(folder).resolve() == config_dir()


def register_resolvers() -> None:
    """Register the ``${ragsweep_root:}`` and ``${ragsweep_data:}`` resolvers (once per
    process): the project root and the packaged data folder, as strings."""
    if not OmegaConf.has_resolver(ROOT_RESOLVER):
        OmegaConf.register_new_resolver(ROOT_RESOLVER, project_root)
    if not OmegaConf.has_resolver(DATA_RESOLVER):
        OmegaConf.register_new_resolver(DATA_RESOLVER, lambda: str(data_dir()))


def plain_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as plain data, without Hydra's own node."""
    register_resolvers()
    container = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    return cast(dict[str, Any], container)


def tracking_settings(config: DictConfig) -> TrackingConfig:
    """The ``tracking`` settings of a composed config (resolved, validated)."""
    tracking = OmegaConf.to_container(config.tracking, resolve=True)
    return from_mapping(TrackingConfig, tracking, "tracking")  # type: ignore[arg-type]


def compose(overrides: Sequence[str] = (), config_name: str = CONFIG_NAME) -> DictConfig:
    """Compose the config as ``ragsweep OVERRIDES...`` would, outside a Hydra app (the
    project's config folders and defaults included; its folder made importable, since the
    caller may build what the config names)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    register_resolvers()
    import_project()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=list(overrides))
