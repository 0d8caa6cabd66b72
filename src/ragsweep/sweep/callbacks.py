"""Hydra callback guarding the ``sweep`` key (referenced from ``conf/config.yaml``)."""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf


class RequireMultirunForSweep(Callback):
    """``ragsweep sweep=NAME`` without ``-m`` would run one default evaluation and ignore the
    sweep; stop with the right command instead (exit status 2, like other config errors)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        name = OmegaConf.select(config, "sweep")
        if name:
            print(
                f"error: sweep={name} runs only in multirun mode: ragsweep -m sweep={name}",
                file=sys.stderr,
            )
            sys.exit(2)
