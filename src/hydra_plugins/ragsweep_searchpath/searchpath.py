"""``RagsweepSearchPath``: put the project's config folders in front of ragsweep's packaged
defaults in Hydra's config search path.

Hydra discovers every plugin under ``hydra_plugins`` for every Hydra app in the
environment, so this one acts only when the primary config source is ragsweep's own
(:func:`ragsweep.config.app.is_packaged_config`). The folders and their order come from
:func:`ragsweep.config.app.override_config_dirs`: ``--config-dir`` folders, then the
project's ``conf/``. The first folder that has a config file wins, so a project's
``conf/corpus/handbook.yaml`` adds an option and its ``conf/eval/default.yaml`` replaces the
packaged one.
"""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath, SearchPathQuery
from hydra.plugins.search_path_plugin import SearchPathPlugin

from ragsweep.config.app import is_packaged_config, override_config_dirs

PROVIDER = "ragsweep-project"
MAIN = "main"


class RagsweepSearchPath(SearchPathPlugin):
    """See module docstring."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        mains = [e for e in search_path.get_path() if e.provider == MAIN]
        if not mains or not is_packaged_config(mains[0].path):
            return
        for folder in override_config_dirs():  # each goes right before main: in order
            search_path.prepend(PROVIDER, f"file://{folder}", anchor=SearchPathQuery(MAIN))
