"""The ``ragsweep`` console script: a thin Hydra app around
:func:`ragsweep.cli.job.run_job`, plus the ``init``, ``check``, ``embed``, ``ui``, ``best``
and ``label`` subcommands.

``ragsweep`` evaluates the default config on the bundled demo data; any axis is an
override (``ragsweep chunking=heading chunking.size=400 preprocess=nfkc``). ``-m`` with
comma-separated values runs a plain Hydra grid (one MLflow run per job); ``-m sweep=NAME``
runs the sweep file ``NAME`` with the one-axis sweeper (docs/sweeps.md): a parent run with
one child run per evaluated configuration. Each job of ``-m`` prints one line; ``-v`` (the
override ``verbose=true``) prints each job's whole summary (:func:`ragsweep.cli.job.run_job`).

``ragsweep init [DIR]``, ``ragsweep check [OVERRIDES...]``, ``ragsweep embed --shard I/N
[OVERRIDES...]``, ``ragsweep ui [--port P] [OVERRIDES...]``, ``ragsweep best
[SWEEP_DIR|RUN_ID]`` and ``ragsweep label [--port P] [OVERRIDES...]`` are dispatched by
:func:`main` before Hydra sees the arguments (a Hydra override always contains ``=``, so
these words cannot be one). ``init`` and ``check`` are documented in docs/install.md,
``embed`` in docs/deploy.md, ``ui`` (the MLflow UI, ``make ui``) in docs/tracking.md,
``best`` (the configuration a sweep chose) in docs/sweeps.md, ``label`` (labelling the
golden set in the browser) in docs/golden.md.
Each subcommand's module is imported only when it is run, and so is the job itself
(:mod:`ragsweep.cli.job`: the pipeline, numpy, the backends) when Hydra starts one: importing
them at the top made ``ragsweep --help`` several times slower (bench/README.md, issue 31).

Config: the packaged defaults (:data:`ragsweep.config.app.CONFIG_PATH`), with the
project's ``conf/`` and every ``--config-dir`` searched first
(:func:`ragsweep.config.app.override_config_dirs`). The project folder is put on
``sys.path`` (:func:`ragsweep.config.app.import_project`) before anything runs, and again in
each job, so ``embedding.options._target_`` can name a class of the project's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from ragsweep.cli.errors import check_command_line, reported_errors
from ragsweep.cli.help import one_repository, wants_help
from ragsweep.cli.mode import mode_from_command_line
from ragsweep.config.app import (
    CONF_DIRS_ENV,
    CONFIG_NAME,
    CONFIG_PATH,
    import_project,
    register_resolvers,
)
from ragsweep.core.errors import RagsweepError
from ragsweep.core.interrupts import INTERRUPTED_STATUS, ignore_interrupts
from ragsweep.core.names import VERBOSE_KEY

CONFIG_DIR_FLAGS = ("--config-dir", "-cd")
VERBOSE_FLAGS = ("-v", "--verbose")
MULTIRUN_FLAGS = ("-m", "--multirun")
INTERRUPTED_SWEEP = "interrupted; the sweep resumes with the same command"
INTERRUPTED_RUN = "interrupted; run the same command again"


@hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name=CONFIG_NAME)
def _app(cfg: DictConfig) -> float:
    import_project()  # again here: a launcher may run this job in another process (joblib)
    hydra_cfg = HydraConfig.get()
    from ragsweep.cli.job import run_job  # only when a job runs (module docstring)

    try:
        return run_job(cfg, hydra_cfg)
    except RagsweepError as exc:
        if hydra_cfg.mode == RunMode.MULTIRUN:
            raise  # the launcher/sweeper records the job as failed and goes on
        remove_if_unused(Path(hydra_cfg.runtime.output_dir), f"{hydra_cfg.job.name}.log")
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def remove_if_unused(run_dir: Path, log_name: str) -> None:
    """Remove the run directory of a refused run when it holds only what Hydra wrote
    before the job started (``.hydra/`` and the job's log), and the folders above it that
    this leaves empty (the day's folder, ``runs/``): refused input leaves nothing behind."""
    entries = {p.name for p in run_dir.iterdir()} if run_dir.is_dir() else set()
    here = Path.cwd().resolve()
    if not entries <= {".hydra", log_name} or run_dir.resolve() in (here, *here.parents):
        return  # work of its own in it, or the folder the user runs in
    shutil.rmtree(run_dir, ignore_errors=True)
    for folder in (run_dir.parent, run_dir.parent.parent):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if empty


def _init(args: Sequence[str]) -> int:
    from ragsweep.cli.init import main as init_main

    return init_main(args)


def _check(args: Sequence[str]) -> int:
    from ragsweep.check import main as check_main

    return check_main(args)


def _embed(args: Sequence[str]) -> int:
    from ragsweep.cli.embed_shard import main as embed_main

    return embed_main(args)


def _ui(args: Sequence[str]) -> int:
    from ragsweep.cli.ui import main as ui_main

    return ui_main(args)


def _label(args: Sequence[str]) -> int:
    from ragsweep.cli.label import main as label_main

    return label_main(args)


def _best(args: Sequence[str]) -> int:
    from ragsweep.cli.best import main as best_main

    return best_main(args)


SUBCOMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "init": _init,
    "check": _check,
    "embed": _embed,
    "ui": _ui,
    "best": _best,
    "label": _label,
}
"""``ragsweep WORD ...`` runs ``SUBCOMMANDS[WORD]`` with the remaining arguments (its exit
status); anything else is a Hydra command line."""


def take_config_dirs(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``--config-dir DIR`` / ``--config-dir=DIR`` / ``-cd DIR`` out of ``argv``.

    Returns ``(dirs, rest)``. ragsweep searches these folders *before* the packaged
    defaults, so a file there replaces the packaged one (plain Hydra would search them
    after the primary config, where they can only add options).
    """
    dirs: list[str] = []
    rest: list[str] = []
    args = iter(argv)
    for arg in args:
        flag, equals, value = arg.partition("=")
        if flag in CONFIG_DIR_FLAGS and equals:
            dirs.append(value)
        elif arg in CONFIG_DIR_FLAGS:
            dirs.append(next(args, ""))
        else:
            rest.append(arg)
    return dirs, rest


def _use_config_dirs(dirs: Sequence[str]) -> None:
    """Put ``dirs`` in front of the config search path (``$RAGSWEEP_CONF_DIR``), after
    checking that each is a folder."""
    for folder in dirs:
        if not Path(folder).expanduser().is_dir():
            print(f"error: --config-dir {folder!r}: no such folder", file=sys.stderr)
            sys.exit(2)
    absolute = [str(Path(d).expanduser().resolve()) for d in dirs]
    previous = [p for p in os.environ.get(CONF_DIRS_ENV, "").split(os.pathsep) if p]
    os.environ[CONF_DIRS_ENV] = os.pathsep.join([*absolute, *previous])


def main() -> None:
    """Console-script entry point: a subcommand (``init``, ``check``, ``embed``, ``ui``,
    ``best``, ``label``), or the Hydra app (``-v``: ``verbose=true``) with secret-looking overrides
    refused before Hydra writes anything and user errors reported as ``error: ...`` with
    exit status 2 (:mod:`ragsweep.cli.errors`)."""
    dirs, argv = take_config_dirs(sys.argv[1:])
    if dirs:
        _use_config_dirs(dirs)
    import_project()  # a _target_ may name a class in the project folder
    if argv and argv[0] in SUBCOMMANDS:
        sys.exit(SUBCOMMANDS[argv[0]](argv[1:]))
    argv = [f"{VERBOSE_KEY}=true" if arg in VERBOSE_FLAGS else arg for arg in argv]
    sys.argv = [sys.argv[0], *argv]
    register_resolvers()
    try:
        with reported_errors():
            check_command_line(sys.argv[1:])
            with one_repository() if wants_help(argv) else mode_from_command_line():
                _app()
    except KeyboardInterrupt:
        ignore_interrupts()  # a second Ctrl-C while ending prints no traceback either
        multirun = any(arg in MULTIRUN_FLAGS for arg in argv)
        print(INTERRUPTED_SWEEP if multirun else INTERRUPTED_RUN, file=sys.stderr)
        sys.exit(INTERRUPTED_STATUS)


if __name__ == "__main__":
    main()
