"""Sweep files (``sweeps/*.yaml``): the model, its validation and Hydra override text.

A sweep file names a baseline (overrides applied to every job), an ordered list of axes,
the objective and the decision rule. Each axis is a mapping ``key: [values]``, or, with
per-axis options, ``{values: {key: [values]}, allow_multi_factor: true}``; an axis with
several keys varies them jointly (their full grid). See docs/sweeps.md for the format.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragsweep.config.schema import (
    SWEEPABLE_GROUPS,
    SWEEPABLE_KEYS,
    check_all,
    from_mapping,
    read_yaml_mapping,
)
from ragsweep.core.errors import ConfigError
from ragsweep.core.registry import did_you_mean
from ragsweep.eval import measures
from ragsweep.eval.measures import Measure
from ragsweep.sweep.family import ADJUSTMENTS, DEFAULT_ADJUSTMENT
from ragsweep.sweep.lines import located, message_parts
from ragsweep.sweep.select import (
    BEST,
    DECISIONS,
    DEFAULT_ALPHA,
    DEFAULT_RESAMPLES,
    DecisionSettings,
)
from ragsweep.sweep.strategy import (
    DEFAULT_MAX_PASSES,
    DEFAULT_STRATEGY,
    DEFAULT_TRIALS,
    STRATEGIES,
)

DIRECTIONS = ("maximize", "minimize")
# Baseline keys the sweeper sets itself.
RESERVED_KEYS = ("sweep", "eval.objective", "tracking.parent_run_id")

_KEY = re.compile(r"^[A-Za-z_][\w-]*(?:[./][A-Za-z_][\w-]*)*$")
_BARE = re.compile(r"^[A-Za-z_][\w\-./:]*$")
_TYPED_WORDS = {"true", "false", "null", "nan", "inf", "-inf", "+inf"}


class SweepFileError(ConfigError):
    """An invalid sweep file (names the file and the offending key)."""


def override_text(value: Any) -> str:
    """``value`` as the right-hand side of a Hydra override, typed as YAML typed it.

    Strings that Hydra would read as another type (``"400"``, ``"true"``) or that contain
    grammar characters are quoted, so ``key=<text>`` always gives back ``value``.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} cannot be swept")
        return repr(value)
    if isinstance(value, str):
        if _BARE.match(value) and value.lower() not in _TYPED_WORDS:
            return value
        return _quote(value)
    raise TypeError(f"{value!r} is not a scalar")


def _quote(text: str) -> str:
    """Single-quote for Hydra, whose quoted strings unescape backslashes only before a quote."""
    escaped = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", text)
    escaped = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, escaped)
    return f"'{escaped}'"


@dataclass(frozen=True)
class Point:
    """One assignment of an axis: ``(key, override text)`` pairs in the axis' key order."""

    assignments: tuple[tuple[str, str], ...]

    @property
    def lines(self) -> dict[str, str]:
        """The point as Hydra overrides by key: ``{"chunking.size": "chunking.size=400"}``."""
        return {key: f"{key}={text}" for key, text in self.assignments}

    @property
    def label(self) -> str:
        """``400`` for a one-key axis, ``chunking.size=400 preprocess=none`` for a grid."""
        if len(self.assignments) == 1:
            return self.assignments[0][1]
        return " ".join(f"{k}={v}" for k, v in self.assignments)


@dataclass(frozen=True)
class Axis:
    """One step of a sweep: its keys and, per key, the values tried (as override text).

    ``allow_multi_factor``: the axis may change result-affecting values other than its own
    keys (docs/sweeps.md, "One factor per axis"); they are then shown and recorded."""

    keys: tuple[str, ...]
    values: tuple[tuple[str, ...], ...]
    allow_multi_factor: bool = False

    @property
    def label(self) -> str:
        return " × ".join(self.keys)

    @property
    def varies_parsers(self) -> bool:
        """Whether the axis varies a corpus parser (:data:`SWEEPABLE_KEYS`)."""
        return any(key in SWEEPABLE_KEYS for key in self.keys)

    def points(self) -> tuple[Point, ...]:
        """Every combination of the keys' values, first key slowest, in file order."""
        return tuple(
            Point(tuple(zip(self.keys, combo, strict=True)))
            for combo in itertools.product(*self.values)
        )


@dataclass(frozen=True)
class AxisEntry:
    """The long form of an axis entry: its values (``key: [values]``) and its options."""

    values: dict[str, Any]
    allow_multi_factor: bool = False


AXIS_OPTIONS = tuple(f.name for f in dataclasses.fields(AxisEntry) if f.name != "values")
"""Per-axis options of the long form (every key of an entry but ``values``)."""


@dataclass(frozen=True)
class SweepFile:
    """The keys a sweep file may contain (validated with ``config.from_mapping``)."""

    axes: tuple[Any, ...]
    description: str = ""
    baseline: dict[str, Any] = field(default_factory=dict)
    objective: str = "recall_at_5"
    direction: str | None = None
    min_improvement: float = 0.0
    decision: str = BEST
    alpha: float = DEFAULT_ALPHA
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    adjust: str = DEFAULT_ADJUSTMENT
    strategy: str = DEFAULT_STRATEGY
    max_passes: int = DEFAULT_MAX_PASSES
    trials: int | None = None


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: ``min_improvement`` is absolute, in the objective's units;
    ``direction`` is the objective measure's own (``maximize`` for higher-is-better);
    ``decision`` names a rule of ``select.DECISIONS``; ``alpha`` is the two-sided level of
    the paired test, ``resamples`` and ``seed`` those of the test and its interval;
    ``adjust`` the family-wise adjustment of the p-values (:mod:`ragsweep.sweep.family`);
    ``strategy`` and ``max_passes`` how many passes over the axes it may make
    (:mod:`ragsweep.sweep.strategy`), ``trials`` how many trials its search makes after
    them (0: a strategy without a search; the search's sampler is seeded with ``seed``)."""

    name: str
    path: Path
    description: str
    baseline: tuple[tuple[str, str], ...]
    axes: tuple[Axis, ...]
    objective: str
    direction: str
    min_improvement: float
    decision: str = BEST
    alpha: float = DEFAULT_ALPHA
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    adjust: str = DEFAULT_ADJUSTMENT
    strategy: str = DEFAULT_STRATEGY
    max_passes: int = DEFAULT_MAX_PASSES
    trials: int = 0

    @property
    def measure(self) -> Measure:
        return measures.parse(self.objective)

    @property
    def passes(self) -> int:
        """The most passes over the axes the strategy makes."""
        return STRATEGIES.get(self.strategy).passes(self.max_passes)

    @property
    def searches(self) -> bool:
        """Whether a search over every axis at once follows the passes
        (:mod:`ragsweep.sweep.search`)."""
        return STRATEGIES.get(self.strategy).searches

    @property
    def varies_parsers(self) -> bool:
        """Whether an axis varies a corpus parser: the jobs then read other corpus text, so
        the digest of the corpus's source files is checked across them instead of the
        text's (:mod:`ragsweep.run.inputs`)."""
        return any(axis.varies_parsers for axis in self.axes)

    @property
    def family_size(self) -> int:
        """The values the sweep's family-wise adjustment counts: every value of every axis
        (an axis compares at most its values with the value to beat), once per pass the
        strategy may make, and a search's ``trials`` (its best, the best of that many
        configurations, against the passes' winner: counted as that many comparisons,
        since a best picked among many looks better than any one value named in advance)."""
        values = sum(len(axis.points()) for axis in self.axes) * self.passes
        return values + (self.trials if self.searches else 0)

    @property
    def settings(self) -> DecisionSettings:
        """What :func:`ragsweep.sweep.select.decide` needs of the file."""
        return DecisionSettings(
            self.measure,
            self.decision,
            self.min_improvement,
            self.alpha,
            self.resamples,
            self.seed,
            self.adjust,
            self.family_size,
        )

    def plan(self) -> dict[str, Any]:
        """Everything that defines what the sweep evaluates and how it chooses."""
        return {
            "baseline": dict(self.baseline),
            "axes": [dict(zip(a.keys, map(list, a.values), strict=True)) for a in self.axes],
            "objective": self.objective,
            "direction": self.direction,
            "min_improvement": self.min_improvement,
            "decision": self.decision,
            "alpha": self.alpha,
            "resamples": self.resamples,
            "seed": self.seed,
            "adjust": self.adjust,
            **self._strategy_plan(),
        }

    def _strategy_plan(self) -> dict[str, Any]:
        """``strategy``, ``max_passes`` (and a search's ``trials``) for :meth:`plan`, left
        out for the default strategy so sweeps started before they existed keep their
        resume identity."""
        if self.strategy == DEFAULT_STRATEGY:  # one pass, whatever max_passes says
            return {}
        plan: dict[str, Any] = {"strategy": self.strategy, "max_passes": self.passes}
        return plan | ({"trials": self.trials} if self.searches else {})

    def params(self) -> dict[str, str]:
        """The sweep file as flat MLflow params of the parent run."""
        params = {
            "sweep.name": self.name,
            "sweep.file": str(self.path),
            "sweep.objective": self.objective,
            "sweep.direction": self.direction,
            "sweep.min_improvement": str(self.min_improvement),
            "sweep.decision": self.decision,
            "sweep.alpha": str(self.alpha),
            "sweep.resamples": str(self.resamples),
            "sweep.seed": str(self.seed),
            "sweep.adjust": self.adjust,
            "sweep.family_size": str(self.family_size),
            "sweep.strategy": self.strategy,
            "sweep.max_passes": str(self.passes),
        }
        if self.searches:
            params["sweep.trials"] = str(self.trials)
        params.update({f"sweep.baseline.{k.lstrip('+')}": v for k, v in self.baseline})
        for number, axis in enumerate(self.axes, start=1):
            params[f"sweep.axis.{number}"] = "; ".join(
                f"{key}=[{', '.join(values)}]"
                for key, values in zip(axis.keys, axis.values, strict=True)
            ) + (" (allow_multi_factor)" if axis.allow_multi_factor else "")
        return params


def resolve_sweep_path(name: str, sweeps_dirs: Sequence[Path]) -> Path:
    """``chunking`` → the first ``<dir>/chunking.yaml`` of ``sweeps_dirs`` (the project's
    ``sweeps/``, then the bundled sweeps: :func:`ragsweep.config.app.sweep_dirs`); a path
    (``a/b.yaml``) is used as is."""
    if "/" in name or name.endswith((".yaml", ".yml")):
        candidates = [Path(name).expanduser()]
    else:
        candidates = [folder / f"{name}.yaml" for folder in sweeps_dirs]
    for path in candidates:
        if path.is_file():
            return path.resolve()
    available = sorted({p.stem for folder in sweeps_dirs for p in folder.glob("*.yaml")})
    hint = did_you_mean(name, available)
    where = ", ".join(str(c) for c in candidates)
    raise SweepFileError(
        f"sweep={name}: no sweep file at {where} (sweeps: {', '.join(available) or 'none'}){hint}"
    )


def load_sweep(path: Path) -> SweepSpec:
    """Read and validate the sweep file at ``path``."""
    data = read_yaml_mapping(path, "a sweep file (with at least 'axes')", SweepFileError)
    try:
        raw = from_mapping(SweepFile, data, "sweep")
        return _build(raw, path)
    except ConfigError as exc:  # blamed on the line of the key it names
        raise SweepFileError(f"{located(path, message_parts(str(exc)))}: {exc}") from None


def _direction(raw: SweepFile) -> str:
    """The objective's direction; a sweep file that names the other one is an error."""
    try:
        measure = measures.parse(raw.objective)
        direction = measure.direction
    except ConfigError as exc:
        raise ConfigError(f"sweep.objective: {exc}") from None
    if raw.direction is not None and raw.direction not in DIRECTIONS:
        raise ConfigError(
            f"sweep.direction={raw.direction!r} is not one of: {', '.join(DIRECTIONS)}"
        )
    if raw.direction is not None and raw.direction != direction:
        better = "higher" if measure.higher_is_better else "lower"
        raise ConfigError(
            f"sweep.direction={raw.direction} contradicts sweep.objective={raw.objective} "
            f"({better} is better): it would search for the worst configuration; "
            f"remove 'direction' (it follows from the objective) or set it to {direction}"
        )
    return direction


def _build(raw: SweepFile, path: Path) -> SweepSpec:
    direction = _direction(raw)
    _check_decision(raw)
    if not raw.axes:
        raise ConfigError("sweep.axes must list at least one axis")
    return SweepSpec(
        name=path.stem,
        path=path,
        description=raw.description,
        baseline=tuple(_baseline_entry(k, v) for k, v in raw.baseline.items()),
        axes=tuple(_axis(entry, f"sweep.axes[{i}]") for i, entry in enumerate(raw.axes)),
        objective=raw.objective,
        direction=direction,
        min_improvement=raw.min_improvement,
        decision=raw.decision,
        alpha=raw.alpha,
        resamples=raw.resamples,
        seed=raw.seed,
        adjust=raw.adjust,
        strategy=raw.strategy,
        max_passes=raw.max_passes,
        trials=_trials(raw),
    )


def _check_decision(raw: SweepFile) -> None:
    """The decision rule and its settings (``decision``, ``alpha``, ``resamples``, ...)."""
    DECISIONS.get(raw.decision)  # an unknown rule: the rules and the closest name
    ADJUSTMENTS.get(raw.adjust)
    STRATEGIES.get(raw.strategy)
    checks = (
        (raw.min_improvement >= 0, "min_improvement", ">= 0"),
        (0.0 < raw.alpha < 1.0, "alpha", "in (0, 1), e.g. 0.05"),
        (raw.resamples >= 1, "resamples", ">= 1"),
        (raw.seed >= 0, "seed", ">= 0"),
        (raw.max_passes >= 1, "max_passes", ">= 1"),
    )
    check_all("sweep", raw, checks)


def _trials(raw: SweepFile) -> int:
    """The search's trials: ``trials`` (default :data:`DEFAULT_TRIALS`) for a strategy that
    searches, 0 otherwise; ``trials`` with a strategy that does not search is an error."""
    searching = [name for name in STRATEGIES.names() if STRATEGIES.get(name).searches]
    if not STRATEGIES.get(raw.strategy).searches:
        if raw.trials is not None:
            raise ConfigError(
                f"sweep.trials: strategy {raw.strategy} makes no search trials; set strategy: "
                f"{' or '.join(searching)} (docs/sweeps.md, Search strategies) or remove trials"
            )
        return 0
    trials = DEFAULT_TRIALS if raw.trials is None else raw.trials
    check_all("sweep", raw, [(trials >= 1, "trials", ">= 1, e.g. 20")])
    return trials


def _baseline_entry(key: Any, value: Any) -> tuple[str, str]:
    where = f"sweep.baseline.{key}"
    plain = str(key).lstrip("+")
    if not _KEY.match(plain):
        raise ConfigError(f"{where}: not a config key (e.g. chunking.size or embedding)")
    if plain in RESERVED_KEYS or re.split(r"[./]", plain)[0] in ("hydra", "sweep"):
        raise ConfigError(f"{where}: set by the sweeper itself; use the sweep file's own keys")
    return str(key), _scalar_text(value, where)


def _axis(entry: Any, where: str) -> Axis:
    """An axis entry: ``key: [values]`` (short form) or ``{values: {...}, <options>}``."""
    if not isinstance(entry, Mapping) or not entry:
        raise ConfigError(f"{where} must be a mapping 'key: [values]', got {entry!r}")
    if "values" not in entry:
        options = [key for key in entry if key in AXIS_OPTIONS]
        if options:
            raise ConfigError(
                f"{where}.{options[0]}: per-axis options need the long form "
                f"{{values: {{key: [values]}}, {options[0]}: ...}} (docs/sweeps.md)"
            )
        return _axis_values(entry, where, allow_multi_factor=False)
    long = from_mapping(AxisEntry, entry, where)
    return _axis_values(long.values, f"{where}.values", long.allow_multi_factor)


def _axis_values(entry: Mapping[Any, Any], where: str, allow_multi_factor: bool) -> Axis:
    if not entry:
        raise ConfigError(f"{where} must be a mapping 'key: [values]', got {dict(entry)!r}")
    keys, values = [], []
    for key, listed in entry.items():
        _check_axis_key(str(key), where)
        if not isinstance(listed, Sequence) or isinstance(listed, str) or not listed:
            raise ConfigError(f"{where}.{key} must be a non-empty list of values")
        texts = tuple(_scalar_text(v, f"{where}.{key}") for v in listed)
        if len(set(texts)) != len(texts):
            raise ConfigError(f"{where}.{key} lists a value twice: {list(listed)}")
        keys.append(str(key))
        values.append(texts)
    return Axis(keys=tuple(keys), values=tuple(values), allow_multi_factor=allow_multi_factor)


def _check_axis_key(key: str, where: str) -> None:
    if not _KEY.match(key):
        raise ConfigError(f"{where}: {key!r} is not a config key (e.g. chunking.size)")
    root = re.split(r"[./]", key)[0]
    if root not in SWEEPABLE_GROUPS and key not in SWEEPABLE_KEYS:
        raise ConfigError(
            f"{where}: {key!r} cannot be an axis: axes vary the retrieval stack "
            f"({', '.join(SWEEPABLE_GROUPS)}) and the parsers ({', '.join(SWEEPABLE_KEYS)}); "
            "objectives are only comparable on the same data, metric definitions and "
            "bookkeeping (put it in the baseline instead)"
        )


def _scalar_text(value: Any, where: str) -> str:
    try:
        return override_text(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{where}: {value!r} is not a single value (string/number/bool)"
        ) from None
