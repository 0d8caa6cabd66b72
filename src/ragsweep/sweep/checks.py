"""What a sweep checks of its axes before any job (:func:`preflight`, which ``ragsweep
check`` runs too) and again on each axis: the baseline composes, every key and group option
exists, and each axis varies one factor (its values, composed, change no result-affecting
value other than the axis' own, unless the axis allows it). Every problem is collected and
blamed on the file and line it is in, or on the command line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from ragsweep.config.schema import SWEEPABLE_KEYS, CorpusConfig
from ragsweep.core.registry import did_you_mean
from ragsweep.sweep.compose import Composed, Composer
from ragsweep.sweep.factors import (
    MAX_LISTED,
    Factors,
    describe,
    other_factors,
    refusal_hint,
    varied,
)
from ragsweep.sweep.lines import located
from ragsweep.sweep.spec import Axis, Point, SweepFileError, SweepSpec

COMMAND_LINE = "command line"


@dataclass(frozen=True)
class SweepProblem:
    """One problem of a sweep: ``where`` is ``file:line``, a file or ``command line``."""

    where: str
    message: str
    axis: int = 0
    """The axis it is about (1-based), 0 for the file or the baseline."""

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass(frozen=True)
class AxisStart:
    """The configuration an axis is checked on: the baseline, or, when the axis' keys exist
    only for an earlier axis' value, that value's configuration (``overrides``)."""

    overrides: Mapping[str, str]
    composed: Composed


@dataclass
class Preflight:
    """What the sweep found before any job: the baseline, every problem, the other factors
    of the axes that allow them, and every composed axis value (label, config) by axis."""

    baseline: Composed
    problems: list[SweepProblem] = field(default_factory=list)
    multi_factor: dict[int, Factors] = field(default_factory=dict)
    values: dict[int, list[tuple[Point, Composed]]] = field(default_factory=dict)

    def raise_problems(self) -> None:
        if self.problems:
            raise SweepFileError("\n".join(str(p) for p in self.problems))


def preflight(composer: Composer) -> Preflight:
    """Every check before a sweep launches anything (see module docstring)."""
    baseline = composer.compose(composer.fixed)
    if baseline.error is not None:
        return Preflight(baseline, [_baseline_problem(composer, baseline.error)])
    found = Preflight(baseline)
    spec = composer.spec
    for number, axis in enumerate(spec.axes, start=1):
        start = _axis_start(composer, found, number, axis)
        problems = _key_problems(composer, start.composed, number, axis)
        if problems:
            found.problems += problems
            continue
        points = axis.points()
        composed = [composer.compose({**start.overrides, **p.lines}) for p in points]
        found.values[number] = list(zip(points, composed, strict=True))
        factors = axis_other_factors(axis, start.composed, points, composed)
        if factors and axis.allow_multi_factor:
            found.multi_factor[number] = factors
        elif factors:
            where = axis_where(spec, number, axis)
            found.problems.append(SweepProblem(where, refusal(number, axis, factors), number))
    return found


def axis_where(spec: SweepSpec, number: int, axis: Axis) -> str:
    """``file:line`` of the axis' first key."""
    return located(spec.path, ["axes", number - 1, axis.keys[0]])


def _baseline_problem(composer: Composer, error: str) -> SweepProblem:
    """An invalid baseline, blamed on the command line when it alone fails, else on the
    first sweep-file baseline entry whose addition (to the entries above it, as the file
    composes them, and the command line) makes composition fail."""
    alone = composer.compose(composer.command_line)
    if alone.error is not None:
        return SweepProblem(COMMAND_LINE, alone.error)
    spec = composer.spec
    prefix: dict[str, str] = {}
    for key, text in spec.baseline:
        prefix[key] = f"{key}={text}"
        entry = composer.compose({**prefix, **composer.command_line})
        if entry.error is not None:
            where = located(spec.path, ["baseline", key])
            return SweepProblem(where, f"baseline {key}: {entry.error}")
    return SweepProblem(str(spec.path), f"the baseline config is invalid: {error}")


def _axis_start(composer: Composer, found: Preflight, number: int, axis: Axis) -> AxisStart:
    """The baseline, or the first earlier axis value whose configuration has the keys."""
    baseline = AxisStart(composer.fixed, found.baseline)
    if all(found.baseline.has_key(key) for key in axis.keys):
        return baseline
    for earlier in range(1, number):
        for point, composed in found.values.get(earlier, []):
            if composed.error is None and all(composed.has_key(k) for k in axis.keys):
                return AxisStart({**composer.fixed, **point.lines}, composed)
    return baseline


def _missing_key(key: str, start: Composed) -> str:
    """Why ``key`` is not in the config: a parser key missing from an older project's corpus
    file is named with the line to add."""
    if key not in SWEEPABLE_KEYS:
        return f"{key} is not a config key"
    assert start.choices is not None
    name = key.split(".", 1)[1]
    default = next(f.default for f in fields(CorpusConfig) if f.name == name)
    corpus = start.choices.get("corpus", "<name>")
    return (
        f"the corpus config has no {name} (a project made before parsers could be swept): "
        f"add `{name}: {default}` to conf/corpus/{corpus}.yaml"
    )


def _key_problems(
    composer: Composer, start: Composed, number: int, axis: Axis
) -> list[SweepProblem]:
    """An axis key that is not in the config, or a group option that does not exist."""
    assert start.choices is not None
    spec = composer.spec
    problems = []
    for key, values in zip(axis.keys, axis.values, strict=True):
        where = located(spec.path, ["axes", number - 1, key])
        if key not in start.choices:
            if not start.has_key(key):
                message = f"axis {number} ({key}): {_missing_key(key, start)}"
                problems.append(SweepProblem(where, message, number))
            continue
        options = composer.group_options(key)
        unknown = [v for v in values if v not in options]
        if unknown:
            problems.append(
                SweepProblem(
                    where,
                    f"axis {number} ({key}): no option {', '.join(unknown)} in config group "
                    f"{key} (options: {', '.join(options)}){did_you_mean(unknown[0], options)}",
                    number,
                )
            )
    return problems


def missing_keys(axis: Axis, start: Composed) -> list[str]:
    """The axis keys the configuration chosen so far does not have (the axis is skipped)."""
    return [key for key in axis.keys if start.resolved is not None and not start.has_key(key)]


def check_axis_factors(
    spec: SweepSpec,
    number: int,
    axis: Axis,
    start: Composed,
    points: Sequence[Point],
    composed: Sequence[Composed],
) -> Factors:
    """The axis' other factors on top of the values chosen so far (checked before the
    sweep on the baseline; an interpolated value can depend on an earlier choice)."""
    found = axis_other_factors(axis, start, points, composed)
    if found and not axis.allow_multi_factor:
        raise SweepFileError(
            f"{axis_where(spec, number, axis)}: on top of the values chosen so far, "
            + refusal(number, axis, found)
        )
    return found


def axis_other_factors(
    axis: Axis, start: Composed, points: Sequence[Point], composed: Sequence[Composed]
) -> Factors:
    """What the axis' valid configurations (and the start, which competes when its value
    is not listed) differ in besides the axis' own values."""
    configs = [(p.label, c.values) for p, c in zip(points, composed, strict=True) if c.values]
    start_label = start.point_of(axis).label
    if start.values and all(start_label != p.label for p in points):
        configs.insert(0, (start_label, start.values))
    groups = [key for key in axis.keys if start.choices and key in start.choices]
    return other_factors(axis, varied(configs), groups)


def factors_tag(spec: SweepSpec, multi_factor: Mapping[int, Factors]) -> str:
    """The parent run's tag value: per multi-factor axis, the other keys it changes."""
    return "; ".join(
        f"axis {number} ({spec.axes[number - 1].label}): {', '.join(found)}"
        for number, found in multi_factor.items()
    )


def factors_note(spec: SweepSpec, number: int, axis: Axis, found: Factors) -> str:
    """What an axis that allows several factors prints before the first job."""
    return f"axis {number}/{len(spec.axes)} {axis.label} (allow_multi_factor) also changes:\n" + (
        "\n".join(f"  {line}" for line in describe(found, MAX_LISTED))
    )


def refusal(number: int, axis: Axis, found: Factors) -> str:
    """A few lines: what else the axis changes (at most :data:`MAX_LISTED` keys with their
    values) and the fix."""
    keys = ", ".join(found)
    listed = "".join(f"\n    {line}" for line in describe(found, MAX_LISTED))
    return (
        f"axis {number} ({axis.label}) is not one factor: its values also differ in "
        f"{keys}:{listed}\n{refusal_hint(axis, found)}"
    )
