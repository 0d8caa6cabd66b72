"""Hydra callbacks, referenced from ``conf/config.yaml`` (``hydra.callbacks``)."""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ragsweep.config import TrackingConfig, from_mapping
from ragsweep.errors import RagsweepError
from ragsweep.tracking_store import prepare_store


class PrepareTrackingStore(Callback):
    """Check and create the MLflow store and experiment in the parent process before a
    multirun launches any job.

    A store that cannot be reached or created fails the launch (``error: ...``, exit status
    2) instead of failing every job after its work. Hydra turns an exception raised by a
    callback into a warning, so the error ends the process here.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            tracking = OmegaConf.to_container(config.tracking, resolve=True)
            cfg = from_mapping(TrackingConfig, tracking, "tracking")  # type: ignore[arg-type]
            if cfg.enabled:
                prepare_store(cfg)
        except RagsweepError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
