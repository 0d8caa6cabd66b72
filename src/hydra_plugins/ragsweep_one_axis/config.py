"""The ``hydra/sweeper=one_axis`` config node, registered in Hydra's ConfigStore.

No ``from __future__ import annotations`` here: Hydra's plugin scanner executes this module
before it is in ``sys.modules``, where dataclasses cannot resolve string annotations.
"""

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore


@dataclass
class OneAxisSweeperConf:
    """Settings of the one-axis sweeper.

    ``sweep``: the sweep file to run: a name in ``sweeps_dir`` or a path (defaults to the
    app's top-level ``sweep`` key, so ``ragsweep -m sweep=chunking`` works); null runs the
    command-line grid with Hydra's basic sweeper. ``resume``: continue the unfinished parent
    run of the same sweep instead of starting a new one. ``max_batch_size``: at most this
    many jobs per launcher call (null: a whole axis at once). ``params``: grid parameters,
    as for the basic sweeper (used only without ``sweep``).
    """

    _target_: str = "hydra_plugins.ragsweep_one_axis.one_axis_sweeper.OneAxisSweeper"
    sweep: str | None = "${oc.select:sweep,null}"
    sweeps_dir: str = "${oc.select:paths.root_dir,.}/sweeps"
    resume: bool = True
    max_batch_size: int | None = None
    params: dict[str, str] | None = None


ConfigStore.instance().store(
    group="hydra/sweeper", name="one_axis", node=OneAxisSweeperConf, provider="ragsweep"
)
