"""Hydra callbacks, referenced from ``conf/config.yaml`` (``hydra.callbacks``)."""

from __future__ import annotations

import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ragsweep.config.app import tracking_settings
from ragsweep.core.errors import RagsweepError
from ragsweep.core.secret_keys import refusal, secret_keys
from ragsweep.tracking.store import prepare_store


class PrepareTrackingStore(Callback):
    """Check and create the MLflow store and experiment in the parent process before a
    multirun launches any job.

    A store that cannot be reached or created fails the launch (``error: ...``, exit status
    2) instead of failing every job after its work. Hydra turns an exception raised by a
    callback into a warning, so the error ends the process here.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            cfg = tracking_settings(config)
            if cfg.enabled:
                prepare_store(cfg)
        except RagsweepError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)


class RejectSecretKeys(Callback):
    """Stop before Hydra writes ``.hydra/`` when the composed config (config files,
    ``--config-dir`` folders and overrides alike) sets a secret-looking key
    (:mod:`ragsweep.core.secret_keys`); exit status 2, like other config errors."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _reject_secrets(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _reject_secrets(config)


def _reject_secrets(config: DictConfig) -> None:
    found = sorted(secret_keys(OmegaConf.to_container(config, resolve=False)))
    if found:
        print(f"error: {refusal(found, 'in the composed config')}", file=sys.stderr)
        sys.exit(2)


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
