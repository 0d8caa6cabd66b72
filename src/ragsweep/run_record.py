"""What MLflow receives for a run: its tags, its params and its name (docs/tracking.md)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from ragsweep import __version__
from ragsweep import tags as tag
from ragsweep.corpus import Corpus
from ragsweep.golden import GoldenSet
from ragsweep.run_config import ResolvedConfig
from ragsweep.tracking import DatasetInput, RunRecord, flatten


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


def run_record(
    resolved: ResolvedConfig,
    metrics: dict[str, float],
    tags: Mapping[str, str],
    output_dir: Path,
    golden: GoldenSet,
) -> RunRecord:
    """The MLflow record of one run. Params are the flattened resolved config; the run is
    nested under ``tracking.parent_run_id`` when one is set."""
    cfg = resolved.cfg
    parent = cfg.tracking.parent_run_id
    return RunRecord(
        run_name=cfg.tracking.run_name or default_run_name(resolved),
        params=flatten(cfg.source),
        metrics=metrics,
        tags={**tags, **({tag.PARENT_RUN_ID: parent} if parent else {})},
        artifacts_dir=output_dir,
        dataset=DatasetInput(
            path=golden.path,
            name=Path(golden.path).name,
            digest=golden.digest,
            context=cfg.eval.split,
        ),
    )


def default_run_name(resolved: ResolvedConfig) -> str:
    """``<mode>-<size>-o<overlap>-<steps>-<backend>``, e.g. ``fixed-800-o100-raw-bm25``."""
    cfg = resolved.cfg
    steps = "+".join(cfg.preprocess.steps) or "raw"
    c = cfg.chunking
    return f"{c.mode}-{c.size}-o{c.overlap}-{steps}-{cfg.embedding.backend}"


def git_commit(root: Path) -> str:
    """The project's git commit (with ``-dirty`` when the tree has changes), or ``unknown``."""
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
