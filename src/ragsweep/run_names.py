"""Run names a user can read in the MLflow runs table (docs/tracking.md, "Run names").

A name is a label, what the run was for in the words the user typed, then ``#`` and a short
suffix that tells launches apart: ``chunking.mode=heading #3f9c1a``.

- a sweep child: ``<axis key>=<value>`` (every key of a multi-key axis), suffix from the
  parent run's id, so the children of one sweep share it (:func:`sweep_child_name`);
- a grid job (``ragsweep -m a=1,2``): its result-affecting overrides, suffix from the grid's
  sweep directory, shared by the grid's jobs;
- a single run: its result-affecting overrides (``defaults`` without any), suffix from its
  run directory.

``tracking.run_name`` replaces the whole name. Names stay short (about 40 characters with
one or two overrides) so the runs table does not cut them off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragsweep.hashing import sha256_text
from ragsweep.run_config import ResolvedConfig, hashed_groups

SUFFIX_CHARS = 6
NO_OVERRIDES = "defaults"


@dataclass(frozen=True)
class RunOrigin:
    """How a run was launched: the overrides the user gave (Hydra's task overrides) and
    ``launch``, what identifies its launch (a grid's sweep directory, a single run's
    directory)."""

    overrides: tuple[str, ...]
    launch: str


def with_suffix(label: str, identity: str) -> str:
    """``<label> #<first characters of identity's sha256>``."""
    return f"{label} #{sha256_text(identity)[:SUFFIX_CHARS]}"


def sweep_child_name(assignments: Sequence[tuple[str, str]], parent_run_id: str) -> str:
    """``chunking.mode=heading #<parent id>``: the axis keys and values, then the first
    characters of the parent run's id (the same for every child of the sweep)."""
    label = " ".join(f"{key}={text}" for key, text in assignments)
    return f"{label} #{parent_run_id[:SUFFIX_CHARS]}"


def sweep_parent_name(sweep: str, parent_run_id: str) -> str:
    """``sweep chunking #<parent id>``."""
    return f"sweep {sweep} #{parent_run_id[:SUFFIX_CHARS]}"


def result_overrides(overrides: Sequence[str]) -> list[str]:
    """The overrides of result-affecting config groups (``chunking.size=400``,
    ``preprocess=none``), as typed; ``tracking.*``, ``paths.*``, ``cache.*``, ``hydra.*``
    and ``sweep=`` are left out."""
    groups = set(hashed_groups())
    kept = []
    for line in overrides:
        key = line.split("=", 1)[0].lstrip("+~")
        if key.split(".", 1)[0].split("@", 1)[0] in groups:
            kept.append(line)
    return kept


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
    cfg = resolved.cfg
    c = cfg.chunking
    return f"{c.mode} {c.size}/{c.overlap} {cfg.preprocess.name} {cfg.embedding.backend}"
