"""What a sweep checks of its axes, before any job and again on each axis: every key and
group option exists, and each axis varies one factor (its values, composed, change no
result-affecting value other than the axis' own, unless the axis allows it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from omegaconf import OmegaConf
from rich.console import Console

from ragsweep.core.terminal import say
from ragsweep.sweep.compose import Composed, Composer
from ragsweep.sweep.factors import Factors, describe, other_factors, varied
from ragsweep.sweep.spec import Axis, Point, SweepFileError, SweepSpec

_ABSENT = object()

_FACTORS_HINT = (
    "\nHold the other values in the baseline and sweep one key (e.g. chunking.mode with "
    "baseline chunking.size and chunking.overlap), or compare the values as they are with "
    "the long form {values: {key: [values]}, allow_multi_factor: true} (docs/sweeps.md)"
)


def check_axes(composer: Composer, baseline: Composed) -> None:
    """Fail before any job on an axis key or group option that does not exist."""
    assert baseline.resolved is not None and baseline.choices is not None
    config = OmegaConf.create(baseline.resolved)
    spec = composer.spec
    for number, axis in enumerate(spec.axes, start=1):
        for key, values in zip(axis.keys, axis.values, strict=True):
            where = f"{spec.path}: axis {number} ({key})"
            if key not in baseline.choices:
                if OmegaConf.select(config, key, default=_ABSENT) is _ABSENT:
                    raise SweepFileError(f"{where}: {key} is not a config key")
                continue
            options = composer.group_options(key)
            unknown = [v for v in values if v not in options]
            if unknown:
                raise SweepFileError(
                    f"{where}: no option {', '.join(unknown)} in config group {key} "
                    f"(options: {', '.join(options)})"
                )


def check_factors(composer: Composer, baseline: Composed, console: Console) -> dict[int, Factors]:
    """Before any job: stop when an axis' values, composed on the baseline, change
    result-affecting values other than the axis' own, unless the axis allows it. Returns
    the other factors of the axes that allow them, by axis number."""
    spec = composer.spec
    allowed: dict[int, Factors] = {}
    refused: list[str] = []
    for number, axis in enumerate(spec.axes, start=1):
        points = axis.points()
        composed = [composer.compose({**composer.fixed, **p.lines}) for p in points]
        found = axis_other_factors(axis, baseline, points, composed)
        if found and axis.allow_multi_factor:
            allowed[number] = found
            _print_factors(console, spec, number, axis, found)
        elif found:
            refused.append(_factors_text(number, axis, found))
    if refused:
        raise SweepFileError(f"{spec.path}: " + "\n".join(refused) + _FACTORS_HINT)
    return allowed


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
            f"{spec.path}: on top of the values chosen so far, "
            + _factors_text(number, axis, found)
            + _FACTORS_HINT
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


def _print_factors(
    console: Console, spec: SweepSpec, number: int, axis: Axis, found: Factors
) -> None:
    say(
        console,
        f"axis {number}/{len(spec.axes)} {axis.label} (allow_multi_factor) also "
        "changes:\n" + "\n".join(f"  {line}" for line in describe(found)),
    )


def _factors_text(number: int, axis: Axis, found: Factors) -> str:
    """The error lines for an axis whose values change other factors too."""
    lines = "".join(f"\n    {line}" for line in describe(found))
    keys = ", ".join(found)
    return (
        f"axis {number} ({axis.label}) is not one factor: its values also differ in {keys}:{lines}"
    )
