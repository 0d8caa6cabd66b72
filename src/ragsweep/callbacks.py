"""Hydra callbacks, referenced from ``conf/config.yaml`` (``hydra.callbacks``)."""

from __future__ import annotations

from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ragsweep.config import TrackingConfig, from_mapping
from ragsweep.tracking import ensure_experiment


class PrepareTrackingStore(Callback):
    """Create the MLflow store and experiment in the parent process before a multirun.

    Parallel jobs (joblib launcher) that each create a brand-new SQLite store at the same
    time crash inside MLflow's schema migrations; creating it once up front avoids that.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        tracking = OmegaConf.to_container(config.tracking, resolve=True)
        cfg = from_mapping(TrackingConfig, tracking, "tracking")  # type: ignore[arg-type]
        if cfg.enabled:
            ensure_experiment(cfg)
