"""What MLflow receives for a run: its tags, params, name, description, metrics and tables
(docs/tracking.md)."""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragsweep import __version__
from ragsweep.core import tags as tag
from ragsweep.data.corpus import Corpus
from ragsweep.data.golden import GoldenSet
from ragsweep.eval.scoring import Summary
from ragsweep.run.config import OPTIONAL_GROUPS, ResolvedConfig, hashed_groups
from ragsweep.run.metrics import (
    BY_TYPE_COLUMNS,
    BY_TYPE_FILE,
    FIGURE_COLUMNS,
    FIGURES_FILE,
    by_type_figures,
    by_type_rows,
    figure_rows,
    split_figures,
)
from ragsweep.run.names import RunOrigin, run_name
from ragsweep.run.notes import run_note
from ragsweep.tracking.log import DatasetInput, RunRecord, flatten
from ragsweep.tracking.tables import logged_tables_tag, write_table


def run_tags(resolved: ResolvedConfig, corpus: Corpus, golden: GoldenSet) -> dict[str, str]:
    """The identity tags of a run: what its result depends on, and where it came from."""
    cfg, model = resolved.cfg, resolved.model
    return {
        tag.CONFIG_HASH: resolved.config_hash,
        tag.CORPUS_HASH: corpus.content_hash(),
        tag.GOLDEN_DIGEST: golden.digest,
        tag.SPLIT: cfg.eval.split,
        tag.MIN_SPAN_OVERLAP: repr(cfg.eval.min_span_overlap),
        tag.EMBEDDING_BACKEND: model.backend,
        tag.EMBEDDING_MODEL: model.name,
        tag.EMBEDDING_VERSION: model.version,
        tag.EMBEDDING_DIMENSION: str(model.dimension),
        tag.EMBEDDING_DIGEST: model.digest or "none",
        tag.VERSION: __version__,
        tag.GIT_COMMIT: git_commit(Path(cfg.paths.root_dir)),
    }


def run_params(source: Mapping[str, Any]) -> dict[str, str]:
    """MLflow params: the result-affecting config groups (:func:`hashed_groups`) of the
    resolved config, flattened under the keys a user types as overrides
    (``chunking.size``, ``preprocess.steps``, ``eval.budgets``). ``paths``, ``tracking`` and
    ``cache`` are left out (they are in ``config.yaml``), and a stage that is off
    (``rerank``, ``judge``) is only ``<group>.enabled=False``, as the config hash sees it."""
    groups: dict[str, Any] = {}
    for group in hashed_groups():
        values = source.get(group)
        if values is None:
            continue
        off = group in OPTIONAL_GROUPS and isinstance(values, Mapping) and not values.get("enabled")
        groups[group] = {"enabled": False} if off else values
    return flatten(groups)


def run_record(
    resolved: ResolvedConfig,
    figures: dict[str, float],
    tags: Mapping[str, str],
    output_dir: Path,
    golden: GoldenSet,
    summary: Summary | None = None,
    origin: RunOrigin | None = None,
) -> RunRecord:
    """The MLflow record of one run, and its table artifacts written into ``output_dir``.

    ``figures`` is every figure the run computed: the headline set
    (:mod:`ragsweep.run.metrics`) becomes MLflow metrics; ``summary``'s per-type means go to
    ``by_type.json`` and every other figure to ``figures.json``. Params are
    :func:`run_params`; the name is :func:`ragsweep.run.names.run_name`, the description
    :func:`ragsweep.run.notes.run_note`; the run is nested under ``tracking.parent_run_id``
    when one is set.
    """
    cfg = resolved.cfg
    parent = cfg.tracking.parent_run_id
    metrics = split_figures(figures, cfg.eval.ks, cfg.eval.budgets, resolved.objective.name)
    by_type = by_type_rows(summary) if summary is not None else []
    in_by_type = by_type_figures(dict(zip(BY_TYPE_COLUMNS, row, strict=True)) for row in by_type)
    rest = {k: v for k, v in figures.items() if k not in in_by_type}  # each figure once
    tables = [write_table(output_dir / FIGURES_FILE, FIGURE_COLUMNS, figure_rows(rest))]
    if summary is not None:
        tables.append(write_table(output_dir / BY_TYPE_FILE, BY_TYPE_COLUMNS, by_type))
    listed = {tag.LOGGED_ARTIFACTS: logged_tables_tag([p.name for p in tables], tags)}
    return RunRecord(
        run_name=run_name(resolved, origin),
        params=run_params(cfg.source),
        metrics=metrics,
        tags={
            tag.NOTE: run_note(resolved, metrics),  # tracking.tags may replace it
            **tags,
            **listed,
            **({tag.PARENT_RUN_ID: parent} if parent else {}),
        },
        artifacts_dir=output_dir,
        dataset=DatasetInput(
            path=golden.path,
            name=Path(golden.path).name,
            digest=golden.digest,
            context=cfg.eval.split,
        ),
    )


@functools.lru_cache(maxsize=8)
def git_commit(root: Path) -> str:
    """The project's git commit (with ``-dirty`` when the tree has changes), or ``unknown``.
    Read once per process and root: the code a process runs is what it imported when it
    started, and the jobs of a sweep in one process each skip two ``git`` calls."""
    try:
        commit = _git(root, "rev-parse", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit}-dirty" if dirty else commit


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=True
    )
    return done.stdout.strip()
