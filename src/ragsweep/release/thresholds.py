"""The release gate's thresholds file (``conf/gate/thresholds.yaml``) and its ratchet.

Floors are keyed by MLflow metric name: ``recall_at_5`` (overall), ``by_type/<type>/<metric>``
(one question type), ``by_type_min/<metric>`` (the weakest type) or
``by_origin/<origin>/<metric>`` (the hand-written or the drafted cases). The ratchet sets each
floor to a holdout run's value minus a slack and only ever raises floors unless explicitly
allowed to lower them. The file is rewritten in a fixed, commented layout; the comment block
at its top (up to the first blank line) is kept as written. The file in force is the
project's ``conf/gate/thresholds.yaml`` when it exists, else the packaged default; the ratchet
always writes the project's copy, never the installed package.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ragsweep.config.app import config_dir, project_root
from ragsweep.config.schema import load_config_file
from ragsweep.core.errors import ConfigError
from ragsweep.eval import measures
from ragsweep.eval.metric_keys import BY_ORIGIN, BY_TYPE
from ragsweep.release.errors import ThresholdsError

THRESHOLDS_ENV = "RAGSWEEP_GATE_THRESHOLDS"
PROMOTED_BASELINE = "promoted"
FLOOR_DECIMALS = 3

_SLICE = re.compile(rf"^(?:{BY_TYPE}/.+/|{BY_TYPE}_min/|{BY_ORIGIN}/[^/]+/)")

SECTION_COMMENTS = {
    "floors": (
        "Minimum value per metric on the holdout split. Keys are MLflow metric names:\n"
        "recall_at_5 (overall), by_type/<type>/recall_at_5 (one question type),\n"
        "by_type_min/recall_at_5 (the weakest type), by_origin/<origin>/recall_at_5\n"
        "(hand or drafted cases). Raised by `ragsweep-gate ratchet`."
    ),
    "max_latency_ms_p95": (
        "Ceiling on the p95 per-query retrieval time in milliseconds (null: not checked)."
    ),
    "max_decline": (
        "Largest allowed fall of any floored metric below the baseline run (null: not checked)."
    ),
    "baseline_run": (
        "Baseline for max_decline: `promoted` (the promoted run's own logged holdout\n"
        "figures), a run id (a holdout run), or null."
    ),
}


def is_quality_metric(key: str) -> bool:
    """Whether ``key`` names a higher-is-better retrieval measure (a value in [0, 1]),
    overall or of a slice (``by_type/<type>/``, ``by_type_min/``, ``by_origin/<origin>/``)."""
    try:
        measure = measures.parse(_SLICE.sub("", key))
    except ConfigError:
        return False
    return measure.higher_is_better is True


@dataclass(frozen=True)
class Thresholds:
    """Limits the gate checks on a holdout evaluation of the promoted config.

    ``floors``: metric name → minimum value in [0, 1]. ``max_latency_ms_p95``: ceiling on
    ``latency_ms_p95`` (ms). ``max_decline``: largest allowed ``baseline − current`` for each
    floored metric. ``baseline_run``: ``promoted``, a run id, or None (no decline check).
    """

    floors: dict[str, float] = field(default_factory=dict)
    max_latency_ms_p95: float | None = None
    max_decline: float | None = None
    baseline_run: str | None = PROMOTED_BASELINE

    def __post_init__(self) -> None:
        for metric, floor in self.floors.items():
            if not is_quality_metric(metric):
                raise ConfigError(
                    f"thresholds.floors.{metric} is not a retrieval metric name (e.g. "
                    "recall_at_5, by_type/<type>/recall_at_5, by_type_min/recall_at_5, "
                    "by_origin/<origin>/recall_at_5)"
                )
            if isinstance(floor, bool) or not isinstance(floor, (int, float)):
                raise ConfigError(f"thresholds.floors.{metric} must be a number, got {floor!r}")
            if not 0.0 <= floor <= 1.0:
                raise ConfigError(f"thresholds.floors.{metric}={floor} must be in [0, 1]")
        if self.max_latency_ms_p95 is not None and self.max_latency_ms_p95 <= 0:
            raise ConfigError(
                f"thresholds.max_latency_ms_p95={self.max_latency_ms_p95} must be > 0"
            )
        if self.max_decline is not None and self.max_decline < 0:
            raise ConfigError(f"thresholds.max_decline={self.max_decline} must be >= 0")


THRESHOLDS_FILE = Path("gate") / "thresholds.yaml"


def project_path() -> Path:
    """``$RAGSWEEP_GATE_THRESHOLDS``, else the project's ``conf/gate/thresholds.yaml``
    (it may not exist yet): the file the ratchet writes."""
    env = os.environ.get(THRESHOLDS_ENV)
    return Path(env) if env else Path(project_root()) / "conf" / THRESHOLDS_FILE


def default_path() -> Path:
    """The thresholds in force: :func:`project_path` if it exists, else the packaged
    defaults (read-only; the ratchet writes the project's copy)."""
    path = project_path()
    if path.is_file() or os.environ.get(THRESHOLDS_ENV):
        return path
    return config_dir() / THRESHOLDS_FILE


def load_thresholds(path: Path) -> Thresholds:
    """Read and validate a thresholds file; errors name the file and the key."""
    return load_config_file(
        Thresholds, path, "thresholds", "a thresholds file (floors, ...)", ThresholdsError
    )


def header_comment(text: str) -> str:
    """The comment block at the top of a file, up to its first blank or non-comment line."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


def render_thresholds(thresholds: Thresholds, header: str = "") -> str:
    """The thresholds as commented YAML: ``header``, then one commented section per key."""
    floors = dict(sorted(thresholds.floors.items(), key=lambda item: _floor_order(item[0])))
    values: dict[str, Any] = {
        "floors": floors,
        "max_latency_ms_p95": thresholds.max_latency_ms_p95,
        "max_decline": thresholds.max_decline,
        "baseline_run": thresholds.baseline_run,
    }
    parts = [header] if header else []
    for key, value in values.items():
        comment = "\n".join(f"# {line}" for line in SECTION_COMMENTS[key].splitlines())
        body = yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=True).rstrip()
        parts.append(f"{comment}\n{body}")
    return "\n\n".join(parts) + "\n"


def save_thresholds(path: Path, thresholds: Thresholds, source: Path | None = None) -> None:
    """Write ``thresholds`` to ``path``, keeping the top comment block of the file they were
    read from (``source``, by default ``path`` itself)."""
    source = source or path
    existing = source.read_text(encoding="utf-8") if source.is_file() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_thresholds(thresholds, header_comment(existing)), encoding="utf-8")


def _floor_order(metric: str) -> tuple[int, str]:
    """Overall metrics first, then the weakest-type minima, the per-origin floors, and the
    per-type floors."""
    order = (f"{BY_TYPE}_min/", f"{BY_ORIGIN}/", f"{BY_TYPE}/")
    group = next((i + 1 for i, prefix in enumerate(order) if metric.startswith(prefix)), 0)
    return group, metric


@dataclass(frozen=True)
class FloorChange:
    """One floor considered by a ratchet: ``old`` (None if new), ``proposed`` (the run's
    value minus the slack) and ``new`` (what is written)."""

    metric: str
    old: float | None
    proposed: float
    new: float

    @property
    def action(self) -> str:
        if self.old is None:
            return "added"
        if self.new > self.old:
            return "raised"
        return "lowered" if self.new < self.old else "kept"


def slackened(value: float, slack: float) -> float:
    """``value − slack`` rounded down to FLOOR_DECIMALS, never below 0."""
    scale = 10**FLOOR_DECIMALS
    # round first so 0.8 − 0.05 = 0.7500000000000001 or 0.7499999999999999 lands on 0.75
    return max(0.0, math.floor(round((value - slack) * scale, 6)) / scale)


def ratchet(
    thresholds: Thresholds,
    metrics: Mapping[str, float],
    slack: float,
    allow_lower: bool = False,
    add: Sequence[str] = (),
    source: str = "the run",
) -> tuple[Thresholds, tuple[FloorChange, ...]]:
    """Floors at ``metrics[m] − slack`` for every floored metric and every metric in
    ``add``; a floor is only lowered when ``allow_lower``. ``source`` names the run in
    errors."""
    if slack < 0:
        raise ThresholdsError(f"--slack={slack} must be >= 0")
    names = list(dict.fromkeys([*thresholds.floors, *add]))
    changes = []
    for metric in names:
        if not is_quality_metric(metric):
            raise ThresholdsError(f"{metric!r} is not a retrieval metric name")
        if metric not in metrics:
            raise ThresholdsError(f"{source} has no metric {metric!r}")
        old = thresholds.floors.get(metric)
        proposed = slackened(metrics[metric], slack)
        new = proposed if old is None or allow_lower else max(old, proposed)
        changes.append(FloorChange(metric, old, proposed, new))
    floors = {**thresholds.floors, **{c.metric: c.new for c in changes}}
    return replace(thresholds, floors=floors), tuple(changes)
