"""Implementation of the one-axis-at-a-time sweeper (public class: ``one_axis_sweeper``).

For each axis of the sweep file, every value is composed into a job config on top of the
best configuration so far, validated and hashed; configurations evaluated before (in this
sweep, or logged under the same parent run by an interrupted attempt) are not launched
again; the rest go to the launcher as one batch. The objective each job returns, and the
per-case objective in each job's ``cases.jsonl`` (for the paired test), decide the value
carried forward (:mod:`ragsweep.sweep.select`). Before any job, every axis is checked to
vary one factor (:mod:`ragsweep.sweep.factors`). Without ``sweep=NAME`` the arguments are a
grid, run by Hydra's basic sweeper.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import HydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import OmegaConfBaseException
from rich.console import Console

from ragsweep.cli.callbacks import tracking_settings
from ragsweep.config.app import plain_config, sweep_dirs
from ragsweep.core import tags as tag
from ragsweep.core.errors import ConfigError, RagsweepError
from ragsweep.core.terminal import say
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import load_golden
from ragsweep.run.config import RunConfig, resolve
from ragsweep.run.names import sweep_child_name
from ragsweep.run.notes import config_summary
from ragsweep.run.record import run_params
from ragsweep.sweep.factors import Factors, describe, other_factors, result_values, varied
from ragsweep.sweep.paired import CaseValues, Unpaired, read_case_values
from ragsweep.sweep.report import (
    plot_objective_by_axis,
    print_table,
    runner_up_text,
    summary_markdown,
)
from ragsweep.sweep.result import AxisResult, FinalConfig, Status, SweepResult, Trial
from ragsweep.sweep.select import AxisDecision, Candidate, NoObjectiveError, decide
from ragsweep.sweep.spec import (
    Axis,
    Point,
    SweepFileError,
    SweepSpec,
    load_sweep,
    override_text,
    resolve_sweep_path,
)
from ragsweep.tracking.sweep_logger import drain_active, logging_jobs

_ABSENT = object()
RUN_NAME_KEY = "tracking.run_name"


@dataclass(frozen=True)
class Composed:
    """A job's config as the launcher will compose it: validated and hashed, or ``error``.
    ``values``: its result-affecting values by key (:func:`factors.result_values`)."""

    lines: tuple[str, ...]
    resolved: dict[str, Any] | None = None
    config_hash: str | None = None
    choices: Mapping[str, str] | None = None
    error: str | None = None
    values: Mapping[str, Any] | None = None

    def value_of(self, key: str) -> str:
        """``key``'s current value as override text (a config group's chosen option)."""
        assert self.resolved is not None and self.choices is not None
        if key in self.choices:
            return str(self.choices[key])
        value = OmegaConf.select(OmegaConf.create(self.resolved), key)
        try:
            return override_text(value)
        except (TypeError, ValueError):
            return str(value)


@dataclass(frozen=True)
class Evaluation:
    """A configuration with a known objective; ``status`` says where it came from;
    ``run_dir``: the job's output directory (None for a run logged before a resume)."""

    objective: float
    run_id: str | None
    n: int | None
    status: Status
    run_dir: Path | None = None


@dataclass(frozen=True)
class _Current:
    """The best configuration so far: its overrides (key → line) and its composition."""

    overrides: dict[str, str]
    composed: Composed

    def with_point(self, point: Point) -> dict[str, str]:
        return {**self.overrides, **point.lines}


@dataclass
class _State:
    """What one sweep has learned so far, by config hash."""

    evaluated: dict[str, Evaluation]
    failed: dict[str, str]
    axes: list[AxisResult]
    next_job: int = 0
    cases: dict[str, CaseValues | Unpaired] = field(default_factory=dict)

    def seen(self, config_hash: str | None) -> bool:
        """True once the configuration has run in this sweep (or before a resume)."""
        return config_hash in self.evaluated or config_hash in self.failed


class OneAxisSweeperImpl:
    """See module docstring; the constructor takes the ``hydra/sweeper=one_axis`` config."""

    def __init__(
        self,
        sweep: str | None,
        sweeps_dir: str,
        resume: bool,
        max_batch_size: int | None,
        params: Mapping[str, str] | None,
    ) -> None:
        self.sweep_name = sweep
        self.sweeps_dir = Path(sweeps_dir)
        self.resume = resume
        self.max_batch_size = max_batch_size
        self.params = params
        self.console = Console()  # messages are wrapped to its width (ragsweep.core.terminal)
        self.grid: BasicSweeper | None = None
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Launcher | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        if not self.sweep_name:
            self.grid = BasicSweeper(self.max_batch_size, dict(self.params or {}))
            self.grid.setup(hydra_context=hydra_context, task_function=task_function, config=config)
            return
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        """Run the sweep file named by ``sweep=NAME`` (or the grid in ``arguments``).

        A ``RagsweepError`` (bad sweep file, every value of an axis failed) ends the process
        like the ``ragsweep`` app does: ``error: ...`` on stderr, exit status 2.
        """
        assert self.config is not None
        if self.grid is not None:
            # the command line's settings, checked before the grid by PrepareTrackingStore
            with logging_jobs(tracking_settings(self.config), self.config.hydra):
                return self.grid.sweep(arguments)
        assert self.sweep_name
        try:
            spec = load_sweep(resolve_sweep_path(self.sweep_name, sweep_dirs(self.sweeps_dir)))
            return _SweepRun(self, spec, arguments).run()
        except RagsweepError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)


class _SweepRun:
    """One execution of a sweep file (see module docstring)."""

    def __init__(self, owner: OneAxisSweeperImpl, spec: SweepSpec, arguments: list[str]) -> None:
        assert owner.config is not None and owner.hydra_context is not None
        assert owner.launcher is not None
        self.owner = owner
        self.config: DictConfig = owner.config
        self.loader = owner.hydra_context.config_loader
        self.launcher: Launcher = owner.launcher
        self.console = owner.console
        self.spec = spec
        self.fixed = self._fixed_overrides(arguments)
        self.sweep_dir = Path(str(self.config.hydra.sweep.dir))
        self.runs: Any = None  # ragsweep.sweep.runs.SweepRuns when tracking is enabled
        self.state = _State(evaluated={}, failed={}, axes=[])

    # -- overrides and composition ----------------------------------------------------------

    def _fixed_overrides(self, arguments: list[str]) -> dict[str, str]:
        """Baseline of the file, then the command line (which wins), as key → override."""
        fixed = {key: f"{key}={text}" for key, text in self.spec.baseline}
        parser = OverridesParser.create(config_loader=self.loader)
        for override in parser.parse_overrides(arguments):
            if override.is_sweep_override():
                raise ConfigError(
                    f"{override.input_line}: a one-axis sweep takes its values from "
                    f"{self.spec.path}; put the values in an axis there"
                )
            if override.key_or_group == "eval.objective":
                raise ConfigError(
                    f"{override.input_line}: the objective comes from the sweep file "
                    f"(objective: {self.spec.objective}); change it there"
                )
            fixed[override.get_key_element()] = str(override.input_line)
        return fixed

    def compose(self, overrides: Mapping[str, str], extra: Sequence[str] = ()) -> Composed:
        """Compose, validate and hash the job config the launcher would build."""
        lines = (*overrides.values(), f"eval.objective={self.spec.objective}", *extra)
        try:
            cfg = self.loader.load_sweep_config(self.config, list(lines))
            choices = dict(cfg.hydra.runtime.choices)
            task = copy.deepcopy(cfg)
            with read_write(task), open_dict(task):
                del task["hydra"]
            resolved = plain_config(task)
            run = resolve(resolved)
            values = result_values(run)
        except (RagsweepError, HydraException, OmegaConfBaseException) as exc:
            return Composed(lines, error=_first_line(exc))
        return Composed(lines, resolved, run.config_hash, choices, values=values)

    def _check_axes(self, baseline: Composed) -> None:
        """Fail before any job on an axis key or group option that does not exist."""
        assert baseline.resolved is not None and baseline.choices is not None
        config = OmegaConf.create(baseline.resolved)
        for number, axis in enumerate(self.spec.axes, start=1):
            for key, values in zip(axis.keys, axis.values, strict=True):
                where = f"{self.spec.path}: axis {number} ({key})"
                if key not in baseline.choices:
                    if OmegaConf.select(config, key, default=_ABSENT) is _ABSENT:
                        raise SweepFileError(f"{where}: {key} is not a config key")
                    continue
                options = self.loader.get_group_options(key)
                unknown = [v for v in values if v not in options]
                if unknown:
                    raise SweepFileError(
                        f"{where}: no option {', '.join(unknown)} in config group {key} "
                        f"(options: {', '.join(options)})"
                    )

    # -- one factor per axis -----------------------------------------------------------------

    def _check_factors(self, baseline: Composed) -> dict[int, Factors]:
        """Before any job: stop when an axis' values, composed on the baseline, change
        result-affecting values other than the axis' own, unless the axis allows it. Returns
        the other factors of the axes that allow them, by axis number."""
        allowed: dict[int, Factors] = {}
        refused: list[str] = []
        for number, axis in enumerate(self.spec.axes, start=1):
            points = axis.points()
            composed = [self.compose({**self.fixed, **p.lines}) for p in points]
            found = self._other_factors(axis, baseline, points, composed)
            if found and axis.allow_multi_factor:
                allowed[number] = found
                self._print_factors(number, axis, found)
            elif found:
                refused.append(_factors_text(number, axis, found))
        if refused:
            raise SweepFileError(f"{self.spec.path}: " + "\n".join(refused) + _FACTORS_HINT)
        return allowed

    def _other_factors(
        self, axis: Axis, start: Composed, points: Sequence[Point], composed: Sequence[Composed]
    ) -> Factors:
        """What the axis' valid configurations (and the start, which competes when its value
        is not listed) differ in besides the axis' own values."""
        configs = [(p.label, c.values) for p, c in zip(points, composed, strict=True) if c.values]
        start_label = self._start_point(axis, start).label
        if start.values and all(start_label != p.label for p in points):
            configs.insert(0, (start_label, start.values))
        groups = [key for key in axis.keys if start.choices and key in start.choices]
        return other_factors(axis, varied(configs), groups)

    def _print_factors(self, number: int, axis: Axis, found: Factors) -> None:
        say(
            self.console,
            f"axis {number}/{len(self.spec.axes)} {axis.label} (allow_multi_factor) also "
            "changes:\n" + "\n".join(f"  {line}" for line in describe(found)),
        )

    @staticmethod
    def _start_point(axis: Axis, start: Composed) -> Point:
        """The start configuration's own values of the axis keys, as a point of the axis."""
        return Point(tuple((key, start.value_of(key)) for key in axis.keys))

    # -- the sweep ------------------------------------------------------------------------

    def run(self) -> SweepResult:
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, self.sweep_dir / "multirun.yaml")
        baseline = self.compose(self.fixed)
        if baseline.error is not None:
            raise SweepFileError(
                f"{self.spec.path}: the baseline config is invalid: {baseline.error}"
            )
        self._check_axes(baseline)
        multi_factor = self._check_factors(baseline)
        self._open_runs(baseline, multi_factor)
        assert baseline.resolved is not None
        tracking = RunConfig.from_container(baseline.resolved).tracking  # the baseline's store
        with logging_jobs(tracking, self.config.hydra):
            return self._sweep(_Current(dict(self.fixed), baseline))

    def _sweep(self, current: _Current) -> SweepResult:
        """Every axis in turn from ``current``, then the conclusion (also when stopped)."""
        try:
            for number, axis in enumerate(self.spec.axes, start=1):
                current = self._sweep_axis(number, axis, current)
            final = self._final(current)
        except BaseException as exc:
            status = "KILLED" if isinstance(exc, KeyboardInterrupt) else "FAILED"
            try:
                self._conclude(None, status)
            except Exception as write_error:  # keep the original error in front
                say(self.console, f"could not record the interrupted sweep: {write_error}")
            raise
        return self._conclude(final, "FINISHED")

    def _open_runs(self, baseline: Composed, multi_factor: Mapping[int, Factors]) -> None:
        """Open (or resume) the parent run; tag it with the axes that vary several factors."""
        assert baseline.resolved is not None and baseline.config_hash is not None
        run_cfg = RunConfig.from_container(baseline.resolved)
        if not run_cfg.tracking.enabled:
            say(self.console, "tracking disabled: no parent run, nothing to resume")
            return
        from ragsweep.sweep.runs import SweepRuns, sweep_digest

        corpus = load_corpus(run_cfg.corpus)
        golden = load_golden(run_cfg.golden, corpus)
        digest = sweep_digest(self.spec, baseline.config_hash, corpus.content_hash(), golden.digest)
        self.runs = SweepRuns.open(run_cfg.tracking, self.spec, digest, self.owner.resume)
        if multi_factor:
            self.runs.tag_parent(tag.SWEEP_MULTI_FACTOR, _factors_tag(self.spec, multi_factor))
        if not self.runs.resumed:
            say(self.console, f"sweep {self.spec.name}: parent run {self.runs.parent_id}")
            return
        for config_hash_, child in self.runs.logged_children(self.spec.objective).items():
            self.state.evaluated[config_hash_] = Evaluation(
                child.objective, child.run_id, child.n, "resumed"
            )
        say(
            self.console,
            f"resuming sweep {self.spec.name} (parent run {self.runs.parent_id}): "
            f"{len(self.state.evaluated)} configuration(s) already logged under it are not "
            "launched again (hydra.sweeper.resume=false starts afresh)",
        )

    def _sweep_axis(self, number: int, axis: Axis, current: _Current) -> _Current:
        """Evaluate every value of ``axis`` on top of ``current``; return the new current."""
        incumbent = current.composed
        points = axis.points()
        composed = [
            self.compose(current.with_point(p), self._tracking_lines(number, axis, p))
            for p in points
        ]
        factors = self._axis_factors(number, axis, incumbent, points, composed)
        start = self._unevaluated_start(number, axis, current, composed)
        launched = self._launch_new(
            number, axis, [*points, *(p for p, _ in start)], [*composed, *(c for _, c in start)]
        )
        trials = [
            self._trial(p, c, c.config_hash == incumbent.config_hash, launched)
            for p, c in zip(points, composed, strict=True)
        ]
        carried = self._carried_incumbent(axis, incumbent, composed, launched)
        if carried is not None:
            trials.insert(0, carried)
        result = self._decide(number, axis, trials, factors)
        self.state.axes.append(result)
        self._describe_axis([incumbent, *composed, *(c for _, c in start)])
        self._report_axis(result)
        assert result.chosen is not None
        if trials[result.chosen].incumbent:
            return current
        index = result.chosen - (carried is not None)
        return _Current(current.with_point(points[index]), composed[index])

    def _axis_factors(
        self,
        number: int,
        axis: Axis,
        start: Composed,
        points: Sequence[Point],
        composed: Sequence[Composed],
    ) -> Factors:
        """The axis' other factors on top of the values chosen so far (checked before the
        sweep on the baseline; an interpolated value can depend on an earlier choice)."""
        found = self._other_factors(axis, start, points, composed)
        if found and not axis.allow_multi_factor:
            raise SweepFileError(
                f"{self.spec.path}: on top of the values chosen so far, "
                + _factors_text(number, axis, found)
                + _FACTORS_HINT
            )
        return found

    def _decide(
        self, number: int, axis: Axis, trials: Sequence[Trial], factors: Factors
    ) -> AxisResult:
        """Choose the axis' value and compare every other value with it, case by case."""
        candidates = [self._candidate(t) for t in trials]
        incumbent_at = next((i for i, t in enumerate(trials) if t.incumbent), None)
        try:
            decision = decide(candidates, incumbent_at, self.spec.settings)
        except NoObjectiveError:
            self.state.axes.append(AxisResult(axis, tuple(trials), None, other_factors=factors))
            raise NoObjectiveError(
                f"axis {number} ({axis.label}): every value failed or was invalid"
            ) from None
        return AxisResult(
            axis,
            tuple(
                _with_decision(t, c, decision, i)
                for i, (t, c) in enumerate(zip(trials, candidates, strict=True))
            ),
            decision.chosen,
            decision.reference,
            decision.runner_up,
            decision.distinguishable,
            factors,
        )

    def _candidate(self, trial: Trial) -> Candidate:
        if trial.objective is None or trial.config_hash is None:
            return Candidate(None, trial.config_hash, None)
        return Candidate(trial.objective, trial.config_hash, self._case_values(trial.config_hash))

    def _case_values(self, config_hash: str) -> CaseValues | Unpaired:
        """The per-case objective of an evaluated configuration (read once per sweep)."""
        if config_hash not in self.state.cases:
            known = self.state.evaluated[config_hash]
            client = self.runs.client if self.runs is not None else None
            self.state.cases[config_hash] = read_case_values(
                self.spec.objective, known.run_dir, known.run_id, client
            )
        return self.state.cases[config_hash]

    def _unevaluated_start(
        self, number: int, axis: Axis, current: _Current, composed: Sequence[Composed]
    ) -> list[tuple[Point, Composed]]:
        """The start of the axis as one extra job, when its value is not among the axis
        values and it has not run yet (the baseline, on the first axis). Without it the axis
        could only choose among its listed values and never keep the start."""
        start = current.composed
        if self.state.seen(start.config_hash) or any(
            c.config_hash == start.config_hash for c in composed
        ):
            return []
        point = self._start_point(axis, start)
        # The start's own overrides plus this axis's child-run tags: the same config hash.
        composed_start = self.compose(current.overrides, self._tracking_lines(number, axis, point))
        if composed_start.config_hash != start.config_hash:
            return []  # only if composing failed: tracking.* is not part of the hash
        say(
            self.console,
            f"axis {number}/{len(self.spec.axes)} {axis.label}: the start value {point.label} "
            "is not among the values; it runs too, as the value to beat",
        )
        return [(point, composed_start)]

    def _carried_incumbent(
        self, axis: Axis, incumbent: Composed, composed: Sequence[Composed], launched: set[str]
    ) -> Trial | None:
        """The best-so-far as a candidate when its value is not among the axis values."""
        if incumbent.config_hash is None or any(
            c.config_hash == incumbent.config_hash for c in composed
        ):
            return None
        if not self.state.seen(incumbent.config_hash):
            return None  # a failed start (launched on this axis) is shown as failed
        return self._trial(self._start_point(axis, incumbent), incumbent, True, launched)

    def _trial(
        self, point: Point, composed: Composed, incumbent: bool, launched: set[str]
    ) -> Trial:
        """``point``'s outcome; ``launched``: the config hashes launched for this axis."""
        if composed.error is not None:
            return Trial(point, "invalid", error=composed.error, incumbent=incumbent)
        assert composed.config_hash is not None
        if composed.config_hash in self.state.failed:
            error = self.state.failed[composed.config_hash]
            return Trial(
                point, "failed", None, composed.config_hash, error=error, incumbent=incumbent
            )
        known = self.state.evaluated[composed.config_hash]
        return Trial(
            point,
            _status(known, composed.config_hash, launched),
            known.objective,
            composed.config_hash,
            known.run_id,
            known.n,
            incumbent=incumbent,
        )

    def _launch_new(
        self,
        number: int,
        axis: Axis,
        points: Sequence[Point],
        composed: Sequence[Composed],
    ) -> set[str]:
        """Launch the valid configurations not evaluated yet (each config once); return
        their config hashes."""
        todo: dict[str, int] = {}
        for index, c in enumerate(composed):
            if c.config_hash is not None and not self.state.seen(c.config_hash):
                todo.setdefault(c.config_hash, index)
        say(
            self.console,
            f"axis {number}/{len(self.spec.axes)} {axis.label}: launching {len(todo)} of "
            f"{len(points)} configuration(s)",
        )
        launched_ms = time.time_ns() // 1_000_000
        returns = self._launch([list(composed[i].lines) for i in todo.values()])
        drain_active()  # the jobs' runs are all in the store before it is read
        new = self.runs.logged_children(self.spec.objective) if self.runs and todo else {}
        for index, ret in zip(todo.values(), returns, strict=True):
            c = composed[index]
            assert c.config_hash is not None
            objective, error = _outcome(ret)
            if objective is None:
                self.state.failed[c.config_hash] = error
                self._record_failure(number, axis, points[index], c, ret, error, launched_ms)
                continue
            child = new.get(c.config_hash)
            self.state.evaluated[c.config_hash] = Evaluation(
                objective,
                child.run_id if child else None,
                child.n if child else None,
                "new",
                _job_dir(ret),
            )
        return set(todo)

    def _launch(self, jobs: list[list[str]]) -> list[JobReturn]:
        returns: list[JobReturn] = []
        for batch in _batches(jobs, self.owner.max_batch_size):
            returns.extend(self.launcher.launch(batch, initial_job_idx=self.state.next_job))
            self.state.next_job += len(batch)
        return returns

    @property
    def _swept_keys(self) -> list[str]:
        """Every key the sweep's axes set (names shorten each to what tells it apart)."""
        return [key for axis in self.spec.axes for key in axis.keys]

    def _tracking_lines(self, number: int, axis: Axis, point: Point) -> list[str]:
        """Overrides that attach a job's run to the parent and tag its axis and value."""
        if self.runs is None:
            return []
        from ragsweep.sweep.runs import child_tags

        tags = child_tags(self.spec, number, axis.label, point.label)
        pairs = ", ".join(f"{key}: {override_text(str(value))}" for key, value in tags.items())
        lines = [f"tracking.parent_run_id={self.runs.parent_id}", f"++tracking.tags={{{pairs}}}"]
        if RUN_NAME_KEY not in self.fixed:  # the user's tracking.run_name wins
            name = sweep_child_name(point.assignments, self.runs.parent_id, self._swept_keys)
            lines.append(f"{RUN_NAME_KEY}={override_text(name)}")
        return lines

    def _record_failure(
        self,
        number: int,
        axis: Axis,
        point: Point,
        composed: Composed,
        ret: JobReturn,
        error: str,
        launched_ms: int,
    ) -> None:
        """Print the failure and log it as a FAILED child run (when tracking is on);
        ``launched_ms``: when the job's batch was launched (ms since the epoch)."""
        say(self.console, f"failed {axis.label}={point.label}: {error}", "  ", style="red")
        if self.runs is None or composed.resolved is None:
            return
        from ragsweep.sweep.runs import child_tags

        job_dir = _job_dir(ret) or self.sweep_dir / f"failed-{(composed.config_hash or 'job')[:12]}"
        self.runs.record_failure(
            run_name="FAILED "
            + sweep_child_name(point.assignments, self.runs.parent_id, self._swept_keys),
            params=run_params(composed.resolved),
            tags={
                **child_tags(self.spec, number, axis.label, point.label),
                tag.CONFIG_HASH: composed.config_hash or "",
            },
            error=error,
            artifacts_dir=job_dir,
            launched_ms=launched_ms,
        )

    def _describe_axis(self, composed: Sequence[Composed]) -> None:
        """Rewrite the descriptions of the runs of the axis just decided (the parent knows
        now which value was kept); ``composed``: the axis' configurations."""
        if self.runs is None:
            return
        configs = {c.config_hash: c.resolved for c in composed if c.resolved is not None}
        lines = {
            t.run_id: config_summary(RunConfig.from_container(configs[t.config_hash]))
            for t in self.state.axes[-1].trials
            if t.run_id and t.config_hash in configs
        }
        self.runs.describe_axis(self.spec, self.state.axes, lines)

    def _report_axis(self, result: AxisResult) -> None:
        trials = result.trials
        skipped = [
            f"{t.point.label} ({t.status})"
            for t in trials
            if t.status in ("reused", "resumed", "invalid")
        ]
        if skipped:
            say(self.console, f"not launched: {', '.join(skipped)}", "  ")
        for t in trials:
            if t.status == "invalid":
                say(self.console, f"invalid {t.point.label}: {t.error or ''}", "  ", style="yellow")
        best = result.best
        assert best is not None and best.objective is not None
        chosen_lines = " ".join(best.point.lines.values())
        chosen = f"chosen {chosen_lines} ({self.spec.objective}={best.objective:.4f})"
        say(self.console, chosen, "  ")
        runner_up = runner_up_text(result, self.spec.alpha)
        if runner_up:
            say(self.console, runner_up, "    ")

    # -- the end ------------------------------------------------------------------------------

    def _final(self, current: _Current) -> FinalConfig:
        composed = current.composed
        assert composed.config_hash is not None and composed.resolved is not None
        known = self.state.evaluated[composed.config_hash]
        return FinalConfig(
            overrides=tuple(line for key, line in current.overrides.items() if key != "sweep"),
            objective=known.objective,
            config_hash=composed.config_hash,
            run_id=known.run_id,
            config=composed.resolved,
        )

    def _conclude(self, final: FinalConfig | None, status: str) -> SweepResult:
        drain_active()  # an interrupted batch's finished jobs are logged before the parent ends
        result = SweepResult(
            spec=self.spec,
            axes=tuple(self.state.axes),
            final=final,
            parent_run_id=self.runs.parent_id if self.runs else None,
            sweep_dir=self.sweep_dir,
        )
        files = [
            result.write_yaml(self.sweep_dir / "sweep_result.yaml"),
            self.sweep_dir / "sweep_summary.md",
            plot_objective_by_axis(result, self.sweep_dir / "objective_by_axis.png"),
        ]
        files[1].write_text(summary_markdown(result), encoding="utf-8")
        if self.runs is not None:
            self.runs.finish(result, files, status)
        print_table(result, self.console)
        return result


_FACTORS_HINT = (
    "\nHold the other values in the baseline and sweep one key (e.g. chunking.mode with "
    "baseline chunking.size and chunking.overlap), or compare the values as they are with "
    "the long form {values: {key: [values]}, allow_multi_factor: true} (docs/sweeps.md)"
)


def _factors_text(number: int, axis: Axis, found: Factors) -> str:
    """The error lines for an axis whose values change other factors too."""
    lines = "".join(f"\n    {line}" for line in describe(found))
    keys = ", ".join(found)
    return (
        f"axis {number} ({axis.label}) is not one factor: its values also differ in {keys}:{lines}"
    )


def _factors_tag(spec: SweepSpec, multi_factor: Mapping[int, Factors]) -> str:
    """The parent run's tag value: per multi-factor axis, the other keys it changes."""
    return "; ".join(
        f"axis {number} ({spec.axes[number - 1].label}): {', '.join(found)}"
        for number, found in multi_factor.items()
    )


def _with_decision(trial: Trial, candidate: Candidate, decision: AxisDecision, index: int) -> Trial:
    """``trial`` with its comparison to the chosen value, and ``n`` from its cases when the
    store did not give it."""
    n = trial.n
    if n is None and isinstance(candidate.cases, CaseValues):
        n = len(candidate.cases.by_case)
    return replace(trial, paired=decision.paired[index], n=n)


def _job_dir(ret: JobReturn) -> Path | None:
    """The job's output directory (where its run wrote ``cases.jsonl``), if known."""
    if ret.hydra_cfg is None:
        return None
    return Path(str(ret.hydra_cfg.hydra.runtime.output_dir))


def _status(known: Evaluation, config_hash: str, launched: set[str]) -> Status:
    """How a configuration with a known objective got it on this axis: ``new`` if it was
    launched for this axis, ``resumed`` if logged before a resume, else ``reused``."""
    if config_hash in launched:
        return "new"
    return "resumed" if known.status == "resumed" else "reused"


def _batches(jobs: list[list[str]], size: int | None) -> Iterator[list[list[str]]]:
    step = size if size and size > 0 else max(len(jobs), 1)
    for begin in range(0, len(jobs), step):
        yield jobs[begin : begin + step]


def _outcome(ret: JobReturn) -> tuple[float | None, str]:
    """The job's objective and ``""``, or None and the error that stopped it."""
    if ret.status != JobStatus.COMPLETED:
        exc = ret._return_value
        return None, f"{type(exc).__name__}: {exc}"
    value = ret.return_value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, f"the task returned {value!r}, not a finite objective"
    return float(value), ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
