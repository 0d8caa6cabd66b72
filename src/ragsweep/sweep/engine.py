"""The one-axis-at-a-time sweep loop: one execution of a sweep file.

For each axis of the sweep file, every value is composed into a job config on top of the
best configuration so far, validated and hashed (:mod:`.compose`); configurations
evaluated before (in this sweep, or logged under the same parent run by an interrupted
attempt) are not launched again; the rest go to the launcher as one batch (:mod:`.launch`).
The objective each job returns, and the per-case objective in each job's ``cases.jsonl``
(for the paired test), decide the value carried forward (:mod:`.select`). Before any job,
every axis is checked to vary one factor (:mod:`.checks`). A strategy with a search
(``strategy: optuna``) runs it after the pass (:mod:`.search`). At the end, or when
stopped, the result is written, logged on the parent run and printed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from hydra.plugins.launcher import Launcher
from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from ragsweep.core import tags as tag
from ragsweep.core.errors import OutputError, RagsweepError
from ragsweep.core.interrupts import uninterrupted
from ragsweep.core.names import FAILED, FINISHED, KILLED, NOT_REPRODUCED
from ragsweep.core.terminal import say
from ragsweep.data.corpus import Corpus, corpus_files_digest, load_corpus
from ragsweep.data.golden import GoldenSet, load_golden
from ragsweep.run.config import RunConfig
from ragsweep.run.notes import config_summary
from ragsweep.sweep.candidates import Candidates
from ragsweep.sweep.checks import (
    check_axis_factors,
    factors_note,
    factors_tag,
    missing_keys,
    preflight,
)
from ragsweep.sweep.compose import Composed, Composer
from ragsweep.sweep.factors import Factors
from ragsweep.sweep.launch import AxisJobs, JobLauncher
from ragsweep.sweep.paired import CaseValues
from ragsweep.sweep.report import (
    PLOT_FILE,
    SUMMARY_FILE,
    plot_objective_by_axis,
    print_table,
    runner_up_text,
    summary_markdown,
)
from ragsweep.sweep.result import (
    RESULT_FILE,
    AxisResult,
    FinalConfig,
    SkippedAxis,
    SweepResult,
    Trial,
)
from ragsweep.sweep.reuse import ReusingLoader
from ragsweep.sweep.runs import SweepRuns, sweep_digest
from ragsweep.sweep.search import Search
from ragsweep.sweep.select import (
    AxisDecision,
    Candidate,
    LeakingAxisError,
    NoObjectiveError,
    decide,
)
from ragsweep.sweep.spec import Axis, Point, SweepSpec
from ragsweep.sweep.state import Current, Evaluation, SweepState, trial_status
from ragsweep.tracking.background import drain_active, logging_jobs

MULTIRUN_FILE = "multirun.yaml"
"""The sweeper's config, saved in the sweep's folder (as Hydra's basic sweeper does)."""


class SweepRun:
    """One execution of a sweep file (see module docstring): ``config`` is the sweeper's
    config, ``loader`` Hydra's config loader as the launcher has it, ``arguments`` the
    command line's overrides, ``resume`` whether to continue the unfinished parent run of
    the same sweep; messages go to ``console``."""

    def __init__(
        self,
        loader: ReusingLoader,
        config: DictConfig,
        launcher: Launcher,
        spec: SweepSpec,
        arguments: list[str],
        resume: bool,
        max_batch_size: int | None,
        console: Console,
    ) -> None:
        self.config = config
        self.launcher = launcher
        self.console = console
        self.spec = spec
        self.composer = Composer(loader, config, spec, arguments)
        self.resume = resume
        self.max_batch_size = max_batch_size
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        self.state = SweepState()
        self.runs: SweepRuns | None = None
        self.jobs: JobLauncher | None = None
        self.access = False
        """Whether the corpus has access metadata: then a value's leaks must be known for
        it to be adopted."""
        self.candidates = Candidates(self.state, spec.objective, False, None)

    def run(self) -> SweepResult:
        """Check the axes, read the golden set and the corpus, make the sweep folder, then
        prepare the store and open the parent run (in that order: broken inputs are refused
        before a store is created or migrated and leave no sweep folder; a sweep folder that
        cannot be written leaves no parent RUNNING), sweep every axis and conclude."""
        checked = preflight(self.composer)
        checked.raise_problems()
        baseline, multi_factor = checked.baseline, checked.multi_factor
        for number, found in multi_factor.items():
            say(self.console, factors_note(self.spec, number, self.spec.axes[number - 1], found))
        inputs = self._read_inputs(baseline)
        self.access = bool(inputs[1].access)
        self._save_sweep_config()  # before the parent exists: a failure leaves none RUNNING
        self.runs = self._open_runs(baseline, multi_factor, inputs)
        client = self.runs.client if self.runs is not None else None
        self.candidates = Candidates(self.state, self.spec.objective, self.access, client)
        self.jobs = JobLauncher(
            self.launcher,
            self.spec,
            self.state,
            self.runs,
            self.console,
            self.sweep_dir,
            self.composer.fixed,
            self.max_batch_size,
        )
        assert baseline.resolved is not None
        tracking = RunConfig.from_container(baseline.resolved).tracking  # the baseline's store
        with logging_jobs(tracking, self.config.hydra):
            return self._sweep(Current(dict(self.composer.fixed), baseline))

    def _sweep(self, current: Current) -> SweepResult:
        """Every axis in turn from ``current``, then the conclusion (also when stopped)."""
        try:
            for pass_number in range(1, self.spec.passes + 1):
                self.state.pass_number = pass_number
                start = current.composed.config_hash
                current = self._pass(current)
                if current.composed.config_hash == start:
                    self.state.stopped = f"pass {pass_number} changed nothing"
                    break
            else:
                self.state.stopped = (
                    f"one pass (strategy {self.spec.strategy})"
                    if self.spec.passes == 1
                    else f"max_passes ({self.spec.passes}) reached"
                )
            if self.spec.searches:
                current = self._search(current)
            final = self._final(current)
            if self.state.failed:
                raise JobsFailedError(failed_message(self.state.failed, self.runs))
        except BaseException as exc:
            status = KILLED if isinstance(exc, KeyboardInterrupt) else FAILED
            try:
                with uninterrupted():  # a second Ctrl-C must not leave the parent RUNNING
                    self._conclude(None, status)
            except Exception as write_error:  # keep the original error in front
                say(self.console, f"could not record the interrupted sweep: {write_error}")
            raise
        return self._conclude(final, FINISHED)

    def _pass(self, current: Current) -> Current:
        """One pass over every axis from ``current``; return the configuration it ends on."""
        if self.spec.passes > 1:
            say(
                self.console,
                f"pass {self.state.pass_number}/{self.spec.passes} ({self.spec.strategy})",
            )
        for number, axis in enumerate(self.spec.axes, start=1):
            missing = missing_keys(axis, current.composed)
            if missing:
                self._skip_axis(number, axis, missing)
                continue
            current = self._sweep_axis(number, axis, current)
        return current

    def _read_inputs(self, baseline: Composed) -> tuple[RunConfig, Corpus, GoldenSet]:
        """The baseline's config, corpus and golden set (a problem ends the sweep before any
        job, tracked or not, and before the sweep folder is made)."""
        assert baseline.resolved is not None
        run_cfg = RunConfig.from_container(baseline.resolved)
        corpus = load_corpus(run_cfg.corpus)
        return run_cfg, corpus, load_golden(run_cfg.golden, corpus)

    def _save_sweep_config(self) -> None:
        """Make the sweep folder and save the sweeper's config there (:data:`MULTIRUN_FILE`)."""
        try:
            self.sweep_dir.mkdir(parents=True, exist_ok=True)
            OmegaConf.save(self.config, self.sweep_dir / MULTIRUN_FILE)
        except OSError as exc:
            raise OutputError(
                f"sweep folder {self.sweep_dir}: cannot write {MULTIRUN_FILE} ({exc}); check "
                "that the folder is writable (or point hydra.sweep.dir elsewhere). Nothing was "
                "run or logged"
            ) from exc

    def _open_runs(
        self,
        baseline: Composed,
        multi_factor: Mapping[int, Factors],
        inputs: tuple[RunConfig, Corpus, GoldenSet],
    ) -> SweepRuns | None:
        """Open (or resume) the parent run for the baseline's ``inputs`` (its config, corpus
        and golden set), tagged with the axes that vary several factors."""
        assert baseline.config_hash is not None
        run_cfg, corpus, golden = inputs
        if not run_cfg.tracking.enabled:
            say(self.console, "tracking disabled: no parent run, nothing to resume")
            return None
        corpus_hash = corpus.content_hash()
        digest = sweep_digest(self.spec, baseline.config_hash, corpus_hash, golden.digest)
        runs = SweepRuns.open(run_cfg.tracking, self.spec, digest, self.resume)
        runs.inputs = {tag.SWEEP_GOLDEN: golden.digest, tag.SWEEP_CORPUS: corpus_hash}
        if self.spec.varies_parsers:  # each parser gives other text: digest the files instead
            del runs.inputs[tag.SWEEP_CORPUS]
            runs.inputs[tag.SWEEP_CORPUS_FILES] = corpus_files_digest(run_cfg.corpus)
        if multi_factor:
            runs.tag_parent(tag.SWEEP_MULTI_FACTOR, factors_tag(self.spec, multi_factor))
        if not runs.resumed:
            say(self.console, f"sweep {self.spec.name}: parent run {runs.parent_id}")
            return runs
        for config_hash_, child in runs.logged_children(self.spec.objective).items():
            self.state.evaluated[config_hash_] = Evaluation(
                child.objective, child.run_id, child.n, "resumed", acl_leaks=child.acl_leaks
            )
        say(
            self.console,
            f"resuming sweep {self.spec.name} (parent run {runs.parent_id}): "
            f"{len(self.state.evaluated)} configuration(s) already logged under it are not "
            "launched again (hydra.sweeper.resume=false starts afresh)",
        )
        return runs

    # -- one axis ---------------------------------------------------------------------------

    def _skip_axis(self, number: int, axis: Axis, missing: Sequence[str]) -> None:
        """An axis over keys that only another choice brings in (``embedding.options.alpha``
        when a hybrid was not chosen) is skipped, with a note (and in the result, once
        however many passes skip it)."""
        skipped = SkippedAxis(number, axis, tuple(missing))
        if all(s.number != number for s in self.state.skipped):
            self.state.skipped.append(skipped)
        say(
            self.console,
            f"axis {number}/{len(self.spec.axes)} {axis.label}: skipped: {skipped.reason}",
            style="yellow",
        )

    def _sweep_axis(self, number: int, axis: Axis, current: Current) -> Current:
        """Evaluate every value of ``axis`` on top of ``current``; return the new current."""
        assert self.jobs is not None
        incumbent = current.composed
        points = axis.points()
        composed = [
            self.state.remember(
                self.composer.compose(
                    current.with_point(p), self.jobs.tracking_lines(number, axis, p)
                )
            )
            for p in points
        ]
        factors = check_axis_factors(self.spec, number, axis, incumbent, points, composed)
        start = self._unevaluated_start(number, axis, current, composed)
        launched = self.jobs.launch_new(
            AxisJobs(
                number,
                axis,
                [*points, *(p for p, _ in start)],
                [*composed, *(c for _, c in start)],
            )
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
        return Current(current.with_point(points[index]), composed[index])

    def _unevaluated_start(
        self, number: int, axis: Axis, current: Current, composed: Sequence[Composed]
    ) -> list[tuple[Point, Composed]]:
        """The start of the axis as one extra job, when its value is not among the axis
        values and it has not run yet (the baseline, on the first axis). Without it the axis
        could only choose among its listed values and never keep the start."""
        assert self.jobs is not None
        start = current.composed
        if self.state.seen(start.config_hash) or any(
            c.config_hash == start.config_hash for c in composed
        ):
            return []
        point = start.point_of(axis)
        # The start's own overrides plus this axis's child-run tags: the same config hash.
        composed_start = self.composer.compose(
            current.overrides, self.jobs.tracking_lines(number, axis, point)
        )
        if composed_start.config_hash != start.config_hash:
            return []  # only if composing failed: tracking.* is not part of the hash
        say(
            self.console,
            f"axis {number}/{len(self.spec.axes)} {axis.label}: the start value {point.label} "
            "is not among the values; it runs too, as the value to beat",
        )
        return [(point, self.state.remember(composed_start))]

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
        return self._trial(incumbent.point_of(axis), incumbent, True, launched)

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
            trial_status(known, composed.config_hash, launched),
            known.objective,
            composed.config_hash,
            known.run_id,
            known.n,
            incumbent=incumbent,
        )

    # -- the decision -------------------------------------------------------------------------

    def _decide(
        self, number: int, axis: Axis, trials: Sequence[Trial], factors: Factors
    ) -> AxisResult:
        """Choose the axis' value and compare every other value with it, case by case."""
        candidates = [self.candidates.of(t.config_hash, t.objective) for t in trials]
        trials = [replace(t, leaks=c.leaks) for t, c in zip(trials, candidates, strict=True)]
        incumbent_at = next((i for i, t in enumerate(trials) if t.incumbent), None)
        try:
            decision = decide(candidates, incumbent_at, self.spec.settings, len(axis.points()))
        except NoObjectiveError as exc:
            self.state.axes.append(
                AxisResult(
                    axis,
                    tuple(trials),
                    None,
                    other_factors=factors,
                    number=number,
                    pass_number=self.state.pass_number,
                )
            )
            self._report_leaks(trials)
            why = (
                str(exc)
                if isinstance(exc, LeakingAxisError)
                else "every value failed or was invalid"
            )
            raise NoObjectiveError(f"axis {number} ({axis.label}): {why}") from None
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
            number,
            self.state.pass_number,
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
        self._report_leaks(trials)
        for t in trials:
            if t.status == "invalid":
                say(self.console, f"invalid {t.point.label}: {t.error or ''}", "  ", style="yellow")
        self._report_choice(result)

    def _report_choice(self, result: AxisResult) -> None:
        """The chosen value and the runner-up's paired comparison with it."""
        best = result.best
        assert best is not None and best.objective is not None
        chosen_lines = " ".join(best.point.lines.values())
        chosen = f"chosen {chosen_lines} ({self.spec.objective}={best.objective:.4f})"
        say(self.console, chosen, "  ")
        runner_up = runner_up_text(result, self.spec.alpha)
        if runner_up:
            say(self.console, runner_up, "    ")

    def _report_leaks(self, trials: Sequence[Trial]) -> None:
        """The values never adopted because they leaked, or their leaks are unknown."""
        leaked = [f"{t.point.label} (acl_leaks={t.leaks:g})" for t in trials if t.leaks]
        if self.access:
            unknown = [t for t in trials if t.objective is not None and t.leaks is None]
            leaked += [f"{t.point.label} (acl_leaks unknown)" for t in unknown]
        if leaked:
            say(
                self.console,
                f"never adopted, leaked restricted documents: {', '.join(leaked)}",
                "  ",
                style="red",
            )

    # -- the search ---------------------------------------------------------------------------

    def _search(self, winner: Current) -> Current:
        """The search after the pass (:mod:`.search`); its decision is described on its
        runs and printed like an axis'. Return the configuration chosen."""
        assert self.jobs is not None
        search = Search(
            self.spec, self.composer, self.jobs, self.state, self.candidates, self.console
        )
        chosen = search.run(winner)
        trials = self.state.axes[-1].trials
        self._describe_axis([self.state.configs[t.config_hash] for t in trials if t.config_hash])
        self._report_choice(self.state.axes[-1])
        assert self.state.search is not None
        say(self.console, self.state.search.why, "  ")
        return chosen

    # -- the end ------------------------------------------------------------------------------

    def _final(self, current: Current) -> FinalConfig:
        composed = current.composed
        assert composed.config_hash is not None and composed.resolved is not None
        known = self.state.evaluated[composed.config_hash]
        return FinalConfig(
            overrides=tuple(
                line for key, line in current.overrides.items() if key not in NOT_REPRODUCED
            ),
            objective=known.objective,
            config_hash=composed.config_hash,
            run_id=known.run_id,
            config=composed.resolved,
            run_dir=known.run_dir,
        )

    def _conclude(self, final: FinalConfig | None, status: str) -> SweepResult:
        drain_active()  # an interrupted batch's finished jobs are logged before the parent ends
        result = SweepResult(
            spec=self.spec,
            axes=tuple(self.state.axes),
            final=final,
            parent_run_id=self.runs.parent_id if self.runs else None,
            sweep_dir=self.sweep_dir,
            skipped=tuple(self.state.skipped),
            passes=self.state.pass_number,
            stopped=self.state.stopped,
            evaluated=self._evaluated(),
            search=self.state.search,
        )
        files = [
            result.write_yaml(self.sweep_dir / RESULT_FILE),
            self.sweep_dir / SUMMARY_FILE,
            plot_objective_by_axis(result, self.sweep_dir / PLOT_FILE),
        ]
        files[1].write_text(summary_markdown(result), encoding="utf-8")
        if self.runs is not None:
            self.runs.finish(result, files, status)
        print_table(result, self.console)
        return result

    def _evaluated(self) -> tuple[dict[str, object], ...]:
        """Every configuration the sweep has an objective for, in evaluation order, with
        its value of each axis (``point``; None for one logged before a resume and not
        composed since)."""
        return tuple(
            {
                "config_hash": config_hash,
                "objective": known.objective,
                "run_id": known.run_id,
                "point": self.state.values_of(config_hash, self.spec.axes),
            }
            for config_hash, known in self.state.evaluated.items()
        )


class JobsFailedError(RagsweepError):
    """Some jobs of the sweep failed: the sweep chose nothing and its parent is FAILED."""


def failed_message(failed: Mapping[str, str], runs: SweepRuns | None) -> str:
    """What a sweep with failed jobs says at its end (the first error, what to do)."""
    first = next(iter(failed.values())).strip().splitlines()
    parent = f"its parent run {runs.parent_id} is left FAILED and " if runs else ""
    return (
        f"{len(failed)} job(s) of the sweep failed (the first: {first[0] if first else '?'}); "
        f"{parent}no configuration was chosen. Fix the cause and run the same command "
        "again: the failed jobs run again, the others are reused"
    )


def _with_decision(trial: Trial, candidate: Candidate, decision: AxisDecision, index: int) -> Trial:
    """``trial`` with its comparison to the chosen value, and ``n`` from its cases when the
    store did not give it."""
    n = trial.n
    if isinstance(candidate.cases, CaseValues):
        n = len(candidate.cases.by_case) if n is None else n
    return replace(trial, paired=decision.paired[index], n=n)
