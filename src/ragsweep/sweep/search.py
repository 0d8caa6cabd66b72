"""The search of ``strategy: optuna``: after the one-axis pass, a seeded TPE search over every
axis at once, then one decision between its best trial and the pass's winner.

Each axis is one categorical parameter over its values; the sampler is Optuna's
``TPESampler`` seeded with the sweep file's ``seed``, driven through Optuna's ask-and-tell
interface, so that every trial is an ordinary job of the sweep: composed on top of the
sweep's fixed overrides, validated and hashed (:mod:`.compose`), and launched as a child run
of the parent through the sweep's launcher, caches and logger (:mod:`.launch`). Before the
first trial the sampler is told the configurations the pass evaluated whose values are all
among the axes' (what the pass learned). A configuration evaluated before (by the pass, an
earlier trial, or an interrupted attempt of the same sweep) is not launched again: its
objective is reused and told. A trial that failed, is invalid or leaked is told as failed
(the sampler learns nothing from it; a leak is never adopted). An axis whose keys only
another axis' value brings in (``embedding.options.alpha`` with ``embedding: hybrid``) is
left out of a trial whose configuration lacks them.

The best trial (the best objective that did not leak, the first asked on a tie) is then
compared with the pass's winner on the same cases by the sweep's paired test
(:func:`ragsweep.sweep.select.decide` with the ``significant`` rule, whatever the sweep's
``decision``): it replaces the winner only if it beats it by more than ``min_improvement``
and its adjusted p is at most ``alpha``. The best is the best of up to ``trials``
configurations, so the family of the adjustment counts every trial as a comparison
(:attr:`ragsweep.sweep.spec.SweepSpec.family_size`: the axis values, plus ``trials``), and
the best's adjusted p is ``min(1, p * H)``: a union bound over the trials, whichever of
them turns out best. The decision is recorded
as one more axis (:class:`ragsweep.sweep.result.SearchAxis`) after the pass's axes.

The sampler is deterministic given its seed and what it is told, so a resumed sweep asks the
same trials in the same order and finds the configurations logged before the interruption
(``resumed``), as long as what it is told is the same.

Optuna is imported when a search starts (a heavy library that one-axis sweeps and
``ragsweep --help`` never need: docs/architecture.md), with its INFO logging silenced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ragsweep.core import tags as tag
from ragsweep.core.terminal import say
from ragsweep.run.names import short_keys
from ragsweep.sweep.candidates import Candidates
from ragsweep.sweep.checks import missing_keys
from ragsweep.sweep.compose import Composed, Composer
from ragsweep.sweep.launch import AxisJobs, JobLauncher
from ragsweep.sweep.paired import CaseValues, PairedDifference
from ragsweep.sweep.report import p_text
from ragsweep.sweep.result import (
    AxisResult,
    SearchAxis,
    SearchPoint,
    SearchResult,
    SearchTrial,
    Status,
    Trial,
)
from ragsweep.sweep.select import (
    SIGNIFICANT,
    TOLERANCE,
    AxisDecision,
    NoObjectiveError,
    best_index,
    decide,
)
from ragsweep.sweep.spec import Axis, Point, SweepSpec
from ragsweep.sweep.state import Current, SweepState, trial_status

if TYPE_CHECKING:  # for annotations only: optuna is imported where a search runs
    from optuna.distributions import BaseDistribution

SAMPLER = "TPESampler"
"""The Optuna sampler of ``strategy: optuna``."""


class TpeStudy:
    """An Optuna study over ``axes`` (one categorical parameter each, over its value labels)
    with a ``TPESampler`` seeded with ``seed``, optimized in ``direction``."""

    def __init__(self, axes: Sequence[Axis], direction: str, seed: int) -> None:
        import optuna  # heavy: only where a search runs (module docstring)

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.names = tuple(f"{number}. {axis.label}" for number, axis in enumerate(axes, 1))
        self.points = {
            name: {point.label: point for point in axis.points()}
            for name, axis in zip(self.names, axes, strict=True)
        }
        self.distributions: dict[str, BaseDistribution] = {
            name: optuna.distributions.CategoricalDistribution(list(points))
            for name, points in self.points.items()
        }
        sampler = optuna.samplers.TPESampler(seed=seed)
        self.study = optuna.create_study(
            direction=optuna.study.StudyDirection[direction.upper()], sampler=sampler
        )

    def tell_known(self, labels: Sequence[str | None], objective: float) -> bool:
        """Add a configuration evaluated before (its value label of each axis) as a complete
        trial; False, and nothing told, when a value is not among its axis' values."""
        if any(label not in self.points[n] for n, label in zip(self.names, labels, strict=True)):
            return False
        trial = self.optuna.trial.create_trial(
            params=dict(zip(self.names, labels, strict=True)),
            distributions=self.distributions,
            value=objective,
        )
        self.study.add_trial(trial)
        return True

    def ask(self) -> tuple[Any, tuple[Point, ...]]:
        """A new trial and its point of each axis."""
        trial = self.study.ask(self.distributions)
        return trial, tuple(self.points[name][trial.params[name]] for name in self.names)

    def tell(self, trial: Any, objective: float | None) -> None:
        """The trial's objective; None: it failed (the sampler does not learn from it)."""
        if objective is None:
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, objective)


def search_axis(spec: SweepSpec) -> SearchAxis:
    """The search's decision as an axis over every key of the sweep (file order)."""
    values: dict[str, list[str]] = {}
    for axis in spec.axes:
        for key, texts in zip(axis.keys, axis.values, strict=True):
            values.setdefault(key, [])
            values[key] += [t for t in texts if t not in values[key]]
    return SearchAxis(
        keys=tuple(values),
        values=tuple(tuple(texts) for texts in values.values()),
        name=f"{spec.strategy} search",
    )


class Search:
    """The search phase of one sweep (module docstring), on the sweep's ``state``: its
    trials are composed by ``composer``, launched by ``jobs`` and compared through
    ``candidates``; messages go to ``console``."""

    def __init__(
        self,
        spec: SweepSpec,
        composer: Composer,
        jobs: JobLauncher,
        state: SweepState,
        candidates: Candidates,
        console: Console,
    ) -> None:
        self.spec = spec
        self.composer = composer
        self.jobs = jobs
        self.state = state
        self.candidates = candidates
        self.console = console
        self.axis = search_axis(spec)
        self.number = len(spec.axes) + 1
        """The decision's number among the axes (and the trials' ``ragsweep.axis_index``)."""
        self.overrides: dict[str, dict[str, str]] = {}
        """Each trial's configuration hash → its overrides by key."""
        self.asked: dict[tuple[str, ...], tuple[Composed, list[tuple[Axis, Point]]]] = {}
        """The configuration of every point asked so far, by its value labels: a point asked
        again has the same overrides, so it is not composed again (Hydra's composition
        takes a good part of a second)."""
        self.short = short_keys(self.axis.keys)

    def run(self, winner: Current) -> Current:
        """Tell the sampler what the pass learned, run every trial, then decide between
        the best trial and the pass's ``winner``; return the configuration chosen."""
        study = TpeStudy(self.spec.axes, self.spec.direction, self.spec.seed)
        told = self._tell_pass(study)
        self.state.search = SearchResult(SAMPLER, (), told)
        say(
            self.console,
            f"search: {self.spec.trials} trial(s) of Optuna's {SAMPLER} (seed "
            f"{self.spec.seed}) over the {len(self.spec.axes)} axes at once, told the "
            f"{told} configuration(s) of the pass first",
        )
        for number in range(1, self.spec.trials + 1):
            self._trial(study, number)
        return self._decide(winner)

    def _tell_pass(self, study: TpeStudy) -> int:
        """Tell ``study`` the clean configurations the pass evaluated, in the order they
        were composed (the same order on resume); return how many."""
        told = 0
        for config_hash in list(self.state.configs):
            known = self.state.evaluated.get(config_hash)
            if known is None or self.candidates.leaked(config_hash):
                continue
            labels = self.state.labels_of(config_hash, self.spec.axes)
            if labels is not None and study.tell_known(labels, known.objective):
                told += 1
        return told

    # -- one trial --------------------------------------------------------------------------

    def _trial(self, study: TpeStudy, number: int) -> None:
        asked, points = study.ask()
        labels = tuple(point.label for point in points)
        if labels not in self.asked:
            self.asked[labels] = self._compose(points, number)
        composed, applied = self.asked[labels]
        values = tuple((axis.label, point.label) for axis, point in applied)
        head = f"trial {number}/{self.spec.trials}"
        title = f"{head} {self._text(applied)}"
        if composed.error is not None:
            trial = SearchTrial(number, values, "invalid", error=composed.error)
        else:
            trial = self._evaluate(number, values, composed, title)
        study.tell(asked, None if trial.leaked else trial.objective)
        assert self.state.search is not None
        self.state.search = replace(self.state.search, trials=(*self.state.search.trials, trial))
        self._say(head if trial.status in ("new", "failed") else title, trial)

    def _compose(
        self, points: Sequence[Point], number: int
    ) -> tuple[Composed, list[tuple[Axis, Point]]]:
        """The trial's configuration: the fixed overrides and every axis' point; when that
        does not compose, without the axes whose keys the configuration lacks."""
        applied = list(zip(self.spec.axes, points, strict=True))
        composed = self._composed(applied, number)
        if composed.error is None:
            return composed, applied
        kept: list[tuple[Axis, Point]] = []
        for axis, point in applied:
            probe = self.composer.compose(self._overrides(kept))
            if probe.error is None and missing_keys(axis, probe):
                continue
            kept.append((axis, point))
        if len(kept) == len(applied):
            return composed, applied
        return self._composed(kept, number), kept

    def _overrides(self, applied: Sequence[tuple[Axis, Point]]) -> dict[str, str]:
        overrides = dict(self.composer.fixed)
        for _, point in applied:
            overrides.update(point.lines)
        return overrides

    def _composed(self, applied: Sequence[tuple[Axis, Point]], number: int) -> Composed:
        overrides = self._overrides(applied)
        point = Point(tuple(pair for _, p in applied for pair in p.assignments))
        extra = {tag.SEARCH_TRIAL: str(number)}
        lines = self.jobs.tracking_lines(self.number, self.axis, point, extra)
        composed = self.state.remember(self.composer.compose(overrides, lines))
        if composed.config_hash is not None:
            self.overrides.setdefault(composed.config_hash, overrides)
        return composed

    def _evaluate(
        self, number: int, values: tuple[tuple[str, str], ...], composed: Composed, title: str
    ) -> SearchTrial:
        """Launch the trial's configuration unless evaluated before; its outcome."""
        config_hash = composed.config_hash
        assert config_hash is not None
        launched: set[str] = set()
        if not self.state.seen(config_hash):
            point = Point(tuple((key, composed.value_of(key)) for key in self._keys(composed)))
            jobs = AxisJobs(self.number, self.axis, [point], [composed], title=title)
            launched = self.jobs.launch_new(jobs)
        if config_hash in self.state.failed:  # launched now, or a failure asked again
            error = self.state.failed[config_hash]
            status: Status = "failed" if config_hash in launched else "reused"
            return SearchTrial(number, values, status, None, config_hash, error=error)
        known = self.state.evaluated[config_hash]
        return SearchTrial(
            number,
            values,
            trial_status(known, config_hash, launched),
            known.objective,
            config_hash,
            known.run_id,
            leaked=self.candidates.leaked(config_hash),
        )

    def _keys(self, composed: Composed) -> list[str]:
        """The sweep's keys ``composed`` has (a trial may lack a conditional axis' keys)."""
        return [key for key in self.axis.keys if composed.has_key(key)]

    def _text(self, applied: Sequence[tuple[Axis, Point]]) -> str:
        """``mode=heading preprocess=nfkc size=400 overlap=0``."""
        return " ".join(f"{self.short[k]}={v}" for _, p in applied for k, v in p.assignments)

    def _say(self, title: str, trial: SearchTrial) -> None:
        """The trial's outcome line, starting with ``title`` (its number, and its values
        unless its launching line named them)."""
        if trial.objective is None:
            say(self.console, f"{title}: {trial.status}: {trial.error or ''}", style="yellow")
            return
        best = self._best()
        mark = ", best so far" if best is not None and best.number == trial.number else ""
        leak = ", leaked: never adopted" if trial.leaked else ""
        say(
            self.console,
            f"{title}: {self.spec.objective} = {trial.objective:.4f} ({trial.status}{mark}{leak})",
        )

    # -- the decision -----------------------------------------------------------------------

    def _best(self) -> SearchTrial | None:
        """The trial with the best objective that did not leak (the first on a tie)."""
        assert self.state.search is not None
        trials = self.state.search.trials
        objectives = [None if t.leaked else t.objective for t in trials]
        try:
            return trials[best_index(objectives, self.spec.measure)]
        except NoObjectiveError:
            return None

    def _decide(self, winner: Current) -> Current:
        """The pass's winner against the search's best (module docstring)."""
        assert self.state.search is not None
        best = self._best()
        trials = [self._decision_trial(winner.composed, True)]
        if best is not None and best.config_hash != winner.composed.config_hash:
            assert best.config_hash is not None
            trials.append(self._decision_trial(self.state.configs[best.config_hash], False))
        candidates = [self.candidates.of(t.config_hash, t.objective) for t in trials]
        settings = replace(self.spec.settings, decision=SIGNIFICANT)
        # one of the sweep's family of comparisons, which counts every trial (family_size)
        decision = decide(candidates, 0, settings, axis_weight=1)
        decided = tuple(
            replace(t, paired=decision.paired[i], leaks=c.leaks)
            for i, (t, c) in enumerate(zip(trials, candidates, strict=True))
        )
        self.state.axes.append(
            AxisResult(
                self.axis,
                decided,
                decision.chosen,
                decision.reference,
                decision.runner_up,
                decision.distinguishable,
                number=self.number,
                pass_number=self.state.pass_number,
            )
        )
        adopted = decision.chosen == 1
        self.state.search = replace(
            self.state.search,
            best=None if best is None else self.state.search.trials.index(best),
            adopted=adopted,
            why=self._why(best, decided, decision),
        )
        if not adopted:
            return winner
        assert best is not None and best.config_hash is not None
        return Current(self.overrides[best.config_hash], self.state.configs[best.config_hash])

    def _decision_trial(self, composed: Composed, winner: bool) -> Trial:
        """A configuration of the decision (the pass's ``winner`` or the search's best):
        nothing is launched for it."""
        config_hash = composed.config_hash
        assert config_hash is not None
        known = self.state.evaluated[config_hash]
        cases = self.candidates.case_values(config_hash)
        n = known.n
        if n is None and isinstance(cases, CaseValues):
            n = len(cases.by_case)
        assignments = tuple((key, composed.value_of(key)) for key in self._keys(composed))
        labels = self.state.labels_of(config_hash, self.spec.axes) or ()
        point = SearchPoint(assignments, tuple(label or "-" for label in labels))
        return Trial(
            point,
            trial_status(known, config_hash, set()),
            known.objective,
            config_hash,
            known.run_id,
            n,
            incumbent=winner,
        )

    def _why(
        self, best: SearchTrial | None, trials: Sequence[Trial], decision: AxisDecision
    ) -> str:
        """Why the final configuration is the one chosen, in words, with the search's best
        against the one-axis winner (Δ = best − winner)."""
        if best is None:
            return "kept the one-axis winner: no trial of the search has a clean objective"
        if len(trials) == 1:
            return f"kept the one-axis winner: the search's best (trial {best.number}) is it"
        adopted = decision.chosen == 1
        found = f"the search's best (trial {best.number}, {trials[1].objective:.4f})"
        versus = f"the one-axis winner ({trials[0].objective:.4f})"
        paired = trials[0 if adopted else 1].paired  # the other one − the chosen one
        if not isinstance(paired, PairedDifference):
            return f"kept {versus}: {found} has no paired comparison with it"
        figures = _figures(paired, turned=adopted, alpha=self.spec.alpha)
        if adopted:
            return f"adopted {found}: significantly better than {versus}: {figures}"
        assert trials[1].objective is not None and trials[0].objective is not None
        gain = self.spec.measure.gain(trials[1].objective, trials[0].objective)
        if gain <= self.spec.min_improvement + TOLERANCE:
            return (
                f"kept {versus}: {found} does not beat it by more than min_improvement "
                f"{self.spec.min_improvement:g}: {figures}"
            )
        return f"kept {versus}: {found} is not significantly better: {figures}"


def _figures(paired: PairedDifference, turned: bool, alpha: float) -> str:
    """``Δ +0.0120 [-0.0040, +0.0290], +5/−2, p = 0.180, adjusted 0.720 (alpha 0.05)``;
    ``turned``: the comparison was made the other way round (its sign is flipped)."""
    sign = -1 if turned else 1
    low, high = sorted((sign * paired.interval[0], sign * paired.interval[1]))
    test = paired.test
    gained, lost = (test.lost, test.gained) if turned else (test.gained, test.lost)
    p = p_text(paired.p_value)
    return (
        f"Δ {sign * paired.delta:+.4f} [{low:+.4f}, {high:+.4f}], +{gained}/−{lost}, "
        f"p {p if p.startswith('<') else '= ' + p}, adjusted {p_text(paired.p_decisive)} "
        f"(alpha {alpha:g})"
    )
