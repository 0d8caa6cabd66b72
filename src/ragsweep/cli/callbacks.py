"""Hydra callbacks, referenced from ``conf/config.yaml`` (``hydra.callbacks``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from ragsweep.config.app import sweep_dirs, tracking_settings
from ragsweep.config.schema import read_yaml_mapping
from ragsweep.core.errors import RagsweepError
from ragsweep.core.secret_keys import refusal, secret_keys
from ragsweep.sweep.spec import SweepFileError, load_sweep, resolve_sweep_path
from ragsweep.tracking.background import experiment_is_ready, probe_seconds
from ragsweep.tracking.parent import check_parent_run
from ragsweep.tracking.store import prepare_store, tracking_uri
from ragsweep.tracking.writable import check_writable


class PrepareTrackingStore(Callback):
    """Check and create the MLflow store and experiment in the parent process before a
    multirun launches any job (without MLflow when both exist at the installed MLflow's
    schema revision, a SQLite file read with ``sqlite3``: the sweep's logger, or each job on
    a parallel launcher or with ``tracking.background=never``, opens it); check a
    ``tracking.parent_run_id`` given by hand (:mod:`ragsweep.tracking.parent`) before a
    single run or a multirun does any work.

    A store that cannot be reached or created fails the launch (``error: ...``, exit status
    2) instead of failing every job after its work. Hydra turns an exception raised by a
    callback into a warning, so the error ends the process here.

    A sweep file's multirun (``-m sweep=NAME``) is the exception: the sweep engine prepares
    the store itself, once it has checked the axes and read the golden set and the corpus
    (:meth:`ragsweep.sweep.engine.SweepRun.run`), so that broken inputs are refused in
    seconds, before a store is created or migrated. Only the cheap checks run here.
    """

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        with _exit_on_error():
            cfg = tracking_settings(config)
            check_writable(cfg)
            check_parent_run(cfg)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        with _exit_on_error():
            cfg = tracking_settings(config)
            check_writable(cfg)
            if (
                cfg.enabled
                and not _sweep_name(config)
                and not experiment_is_ready(tracking_uri(cfg), cfg.experiment, probe_seconds(cfg))
            ):
                prepare_store(cfg)  # create, migrate or refuse it before any job
            # else it is ready (sqlite3): the sweep's logger opens it, or each job does on a
            # parallel launcher (joblib, Ray, submitit) and with tracking.background=never
            check_parent_run(cfg)


@contextmanager
def _exit_on_error() -> Iterator[None]:
    """A RagsweepError ends the process: ``error: ...`` on stderr, exit status 2."""
    try:
        yield
    except RagsweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


class RejectSecretKeys(Callback):
    """Stop before Hydra writes ``.hydra/`` when the composed config (config files,
    ``--config-dir`` folders and overrides alike) or the sweep file of ``-m sweep=NAME``
    (its baseline and axes) sets a secret-looking key or value
    (:mod:`ragsweep.core.secret_keys`); exit status 2, like other config errors.

    The sweep file is also validated here, before the next callback creates or migrates
    the tracking store (seconds), so a broken sweep file is refused at once."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _reject_secrets(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _reject_secrets(config)
        with _exit_on_error():
            _check_sweep_file(config)


def _check_sweep_file(config: DictConfig) -> None:
    """Refuse secrets in the sweep file ``hydra.sweeper.sweep`` names, then validate it."""
    name = _sweep_name(config)
    if not name:
        return
    folder = Path(str(OmegaConf.select(config, "hydra.sweeper.sweeps_dir") or "sweeps"))
    path = resolve_sweep_path(str(name), sweep_dirs(folder))
    data = read_yaml_mapping(path, "a sweep file (with at least 'axes')", SweepFileError)
    found = sorted(secret_keys(data))
    if found:
        raise SweepFileError(refusal(found, f"in the sweep file {path}"))
    load_sweep(path)


def _sweep_name(config: DictConfig) -> str:
    """The sweep file a multirun sweeps (``-m sweep=NAME``), or "" for a plain grid."""
    return str(OmegaConf.select(config, "hydra.sweeper.sweep") or "")


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
