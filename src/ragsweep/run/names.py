"""Run names a user can read in the MLflow runs table (docs/tracking.md, "Run names").

A name is a label, what the run was for in the words the user typed, then ``#`` and a short
suffix that tells launches apart: ``mode=heading #3f9c``.

- a sweep child: ``<axis>=<value>`` (every key of a multi-key axis), each axis key shortened
  to its last dotted part (``chunking.overlap`` → ``overlap``) unless another swept key of
  the sweep ends the same way (``embedding.model`` and ``rerank.model`` stay whole); suffix
  from the parent run's id, so the children of one sweep share it (:func:`sweep_child_name`);
- a grid job (``ragsweep -m a=1,2``): its result-affecting overrides, suffix from the grid's
  sweep directory, shared by the grid's jobs;
- a single run: its result-affecting overrides (``defaults`` without any), suffix from its
  run directory.

``tracking.run_name`` replaces the whole name. A sweep child's name starts with what
MLflow's default *Run Name* column shows of it (about 15 characters under the parent in
MLflow 3.17.2: ``overlap=0 #27a1`` whole); its 4-hex suffix (:data:`SWEEP_SUFFIX_CHARS`)
tells sweeps apart, and grids and single runs keep 6 (:data:`SUFFIX_CHARS`), so a sweep's
names never equal a grid's.
"""

from __future__ import annotations

import dataclasses
import typing
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.types import RunMode

from ragsweep.config.schema import is_hashed
from ragsweep.core.hashing import sha256_text
from ragsweep.run.config import ResolvedConfig, RunConfig, hashed_groups
from ragsweep.run.describe import describe

SUFFIX_CHARS = 6
"""Hex characters of a grid job's or a single run's suffix."""
SWEEP_SUFFIX_CHARS = 4
"""Hex characters of the parent run's id in a sweep's names: two sweeps of one experiment
share it with a chance of 1 in 65,536, and then their names still differ unless they also
swept the same axis to the same value."""
NO_OVERRIDES = "defaults"
LABEL = "{mode} {size}/{overlap} {preprocess} {backend}"
"""The label of a run launched by an API call (:func:`config_label`)."""


@dataclass(frozen=True)
class RunOrigin:
    """How a run was launched: the overrides the user gave (Hydra's task overrides) and
    ``launch``, what identifies its launch (a grid's sweep directory, a single run's
    directory); ``multirun``: one job of ``-m`` (a grid or a sweep) rather than a single run."""

    overrides: tuple[str, ...]
    launch: str
    multirun: bool = False


def launch_origin(hydra_cfg: Any) -> RunOrigin:
    """The origin of the Hydra job ``hydra_cfg`` (``HydraConfig.get()``): its task overrides,
    and the grid's sweep directory (``-m``) or the run's own directory."""
    grid = hydra_cfg.mode == RunMode.MULTIRUN
    launch = hydra_cfg.sweep.dir if grid else hydra_cfg.runtime.output_dir
    return RunOrigin(tuple(hydra_cfg.overrides.task), str(Path(str(launch)).resolve()), grid)


def with_suffix(label: str, identity: str) -> str:
    """``<label> #<first characters of identity's sha256>``."""
    return f"{label} #{sha256_text(identity)[:SUFFIX_CHARS]}"


def sweep_child_name(
    assignments: Sequence[tuple[str, str]], parent_run_id: str, swept_keys: Iterable[str] = ()
) -> str:
    """``mode=heading #<parent id>``: the axis keys (:func:`short_keys` among every key
    ``swept_keys`` of the sweep) and values, then the first characters of the parent run's
    id (the same for every child of the sweep)."""
    short = short_keys([*swept_keys, *(key for key, _ in assignments)])
    label = " ".join(f"{short[key]}={text}" for key, text in assignments)
    return f"{label} #{parent_run_id[:SWEEP_SUFFIX_CHARS]}"


def short_keys(keys: Iterable[str]) -> dict[str, str]:
    """Each key → its last dotted part (``chunking.overlap`` → ``overlap``), or the key
    itself when another of ``keys`` has the same last part."""
    unique = list(dict.fromkeys(keys))
    last = {key: key.rsplit(".", 1)[-1] for key in unique}
    counts = Counter(last.values())
    return {key: part if counts[part] == 1 else key for key, part in last.items()}


def sweep_parent_name(sweep: str, parent_run_id: str) -> str:
    """``sweep chunking #<parent id>``."""
    return f"sweep {sweep} #{parent_run_id[:SWEEP_SUFFIX_CHARS]}"


def result_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides of result-affecting values (``chunking.size=400``, ``preprocess=none``),
    as typed; ``tracking.*``, ``paths.*``, ``cache.*``, ``hydra.*``, ``sweep=`` and fields
    that are not hashed (``corpus.path``: the corpus is hashed by content) are left out."""
    return [line for line in overrides if _affects_result(line.split("=", 1)[0].lstrip("+~"))]


def _affects_result(key: str) -> bool:
    group, _, rest = key.partition(".")
    group = group.split("@", 1)[0]
    if group not in hashed_groups():
        return False
    if not rest:
        return True  # a config group's option: preprocess=nfkc
    fields = {f.name: f for f in dataclasses.fields(typing.get_type_hints(RunConfig)[group])}
    field = fields.get(rest.split(".", 1)[0])
    return field is None or is_hashed(field)


def run_name(resolved: ResolvedConfig, origin: RunOrigin | None) -> str:
    """The name of a run that is not a sweep child (module docstring); without ``origin``
    (an API call) the label summarises the config."""
    configured = resolved.cfg.tracking.run_name
    if configured:
        return configured
    if origin is None:
        return with_suffix(config_label(resolved), resolved.config_hash)
    label = " ".join(result_overrides(origin.overrides)) or NO_OVERRIDES
    return with_suffix(label, origin.launch)


def config_label(resolved: ResolvedConfig) -> str:
    """``fixed 800/100 none bm25``: split mode, size/overlap, preprocessing (the option
    name) and backend."""
    return describe(resolved.cfg, LABEL)
