"""Hydra callbacks, referenced from ``conf/config.yaml`` (``hydra.callbacks``)."""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ragsweep.config import TrackingConfig, from_mapping
from ragsweep.secret_keys import refusal, secret_keys
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


class RejectSecretKeys(Callback):
    """Stop before Hydra writes ``.hydra/`` when the composed config (config files,
    ``--config-dir`` folders and overrides alike) sets a secret-looking key
    (:mod:`ragsweep.secret_keys`); exit status 2, like other config errors."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _reject_secrets(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _reject_secrets(config)


def _reject_secrets(config: DictConfig) -> None:
    found = sorted(secret_keys(OmegaConf.to_container(config, resolve=False)))
    if found:
        print(f"error: {refusal(found, 'in the composed config')}", file=sys.stderr)
        sys.exit(2)
