"""The ``ragsweep`` console script: a thin Hydra app around :func:`run_from_config`.

``ragsweep`` evaluates the default config on the bundled demo data; any axis is an
override (``ragsweep chunking=heading chunking.size=400 preprocess=nfkc``). ``-m`` with
comma-separated values runs a plain Hydra grid (one MLflow run per job); ``-m sweep=NAME``
runs ``sweeps/NAME.yaml`` with the one-axis sweeper (docs/sweeps.md): a parent run with one
child run per evaluated configuration.

Config directory: see :func:`ragsweep.appconfig.config_dir`. Extra config folders can be
added with Hydra's ``--config-dir``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from ragsweep.appconfig import config_dir, plain_config, register_resolvers
from ragsweep.cli_errors import check_command_line, reported_errors
from ragsweep.errors import RagsweepError
from ragsweep.pipeline import run_evaluation
from ragsweep.run_config import resolve


def run_from_config(cfg: DictConfig, output_dir: Path) -> float:
    """Validate ``cfg``, run one evaluation into ``output_dir``; return the objective."""
    return run_evaluation(resolve(plain_config(cfg)), output_dir).objective


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
def _app(cfg: DictConfig) -> float:
    hydra_cfg = HydraConfig.get()
    output_dir = Path(hydra_cfg.runtime.output_dir)
    try:
        return run_from_config(cfg, output_dir)
    except RagsweepError as exc:
        if hydra_cfg.mode == RunMode.MULTIRUN:
            raise  # the launcher/sweeper records the job as failed and goes on
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    """Console-script entry point: refuse secret-looking overrides before Hydra writes
    anything, then run the Hydra app with user errors reported as ``error: ...`` and exit
    status 2 (:mod:`ragsweep.cli_errors`)."""
    register_resolvers()
    with reported_errors():
        check_command_line(sys.argv[1:])
        _app()


if __name__ == "__main__":
    main()
