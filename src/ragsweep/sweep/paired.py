"""Per-case objective values of a sweep's configurations and paired comparisons of them.

Every configuration of a sweep is scored on the same golden cases (the data and metric
definitions cannot be axes), so two of them are compared case by case: the per-case
differences of the objective, their mean (in the objective's units), how many cases went
up (``gained``) and down (``lost``), and the two-sided paired randomization test of
``ragsweep-compare`` with the interval obtained by inverting it (:mod:`ragsweep.eval.stats`:
the interval excludes 0 exactly when p <= 1 - level; with the same resamples and seed the
p-value is the same as ``ragsweep-compare``'s). ``p_adjusted`` is the p-value after the
sweep's family-wise adjustment (:mod:`ragsweep.sweep.family`), set once the axis is decided.

A configuration's per-case values come from the ``cases.jsonl`` its job wrote into its run
directory, or, for a child run logged by an earlier attempt of a resumed sweep, from that
run's MLflow artifact (``cases.jsonl.gz``, or the plain file of a run logged before it was
compressed: :func:`ragsweep.tracking.artifacts.artifact_text`). When neither can be read the
comparison is :class:`Unpaired`, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ragsweep.core.names import CASES_FILE
from ragsweep.eval import measures
from ragsweep.eval.attribution import CaseSide, counts, explain, hit_measure
from ragsweep.eval.metric_keys import ACL_LEAKS
from ragsweep.eval.scoring import CaseResult, cases_from_jsonl
from ragsweep.eval.stats import PairedTest, paired_randomization_test
from ragsweep.tracking.artifacts import artifact_text

INTERVAL_LEVEL = 0.95
"""Coverage of a run's own interval of its mean (the grid's column); a paired difference's
interval has the sweep's ``1 − alpha``."""


@dataclass(frozen=True)
class CaseValues:
    """One configuration's objective per answerable case: case id → value, in file order;
    ``sides``: per case, whether it hits on the objective's hit measure
    (:func:`~ragsweep.eval.attribution.hit_measure`) and its evidence spans
    (:class:`~ragsweep.eval.attribution.CaseSide`), empty when the objective has no hit
    measure (``mrr``); ``leaks``: its ``acl_leaks`` summed over every case
    (docs/metrics.md, "Access measures"; 0 for a corpus without access metadata)."""

    by_case: Mapping[str, float]
    sides: Mapping[str, tuple[bool, CaseSide]] = field(default_factory=dict)
    leaks: float = 0.0

    @classmethod
    def from_cases(cls, cases: Iterable[CaseResult], objective: str, source: str) -> CaseValues:
        """The ``objective`` of every scored case; ``source`` names the file in errors."""
        values: dict[str, float] = {}
        sides: dict[str, tuple[bool, CaseSide]] = {}
        hit = hit_measure(measures.parse(objective))
        leaks = 0.0
        for case in cases:
            leaks += (case.access or {}).get(ACL_LEAKS, 0.0)
            if case.metrics is None:
                continue  # unanswerable: never scored
            if objective not in case.metrics:
                raise ValueError(f"{source} has no per-case {objective} (case {case.id})")
            values[case.id] = float(case.metrics[objective])
            if hit is not None and hit.name in case.metrics:
                side = CaseSide.of(case.spans, case.metrics, hit)
                sides[case.id] = (case.metrics[hit.name] > 0, side)
        return cls(values, sides, leaks)

    def lost_by_stage(self, chosen: CaseValues) -> dict[str, int] | None:
        """The cases this configuration misses and ``chosen`` hits, counted by the stage
        that lost their evidence (:func:`~ragsweep.eval.attribution.explain`); None
        without hit measures."""
        if not self.sides or not chosen.sides:
            return None
        return counts(
            explain(side, chosen.sides[case][1])
            for case, (hit, side) in self.sides.items()
            if not hit and case in chosen.sides and chosen.sides[case][0]
        )


@dataclass(frozen=True)
class Unpaired:
    """A comparison that could not be made, and why."""

    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"unavailable": self.reason}


@dataclass(frozen=True)
class PairedDifference:
    """A configuration minus another, case by case on the ``n`` cases both scored.

    ``delta`` is the mean per-case difference (objective units; > 0 means a higher
    objective, whatever the direction), ``test`` the paired randomization test of delta = 0
    with its inverted interval, ``p_adjusted`` its p-value after the sweep's family-wise
    adjustment (None until adjusted).
    """

    n: int
    delta: float
    test: PairedTest
    p_adjusted: float | None = None
    lost_by_stage: dict[str, int] | None = None
    """The cases whose hit this configuration lost against the other, by the pipeline stage
    that lost their evidence (None: no span traces or hit measure)."""

    @property
    def p_value(self) -> float:
        return self.test.p_value

    @property
    def interval(self) -> tuple[float, float]:
        return self.test.low, self.test.high

    @property
    def p_decisive(self) -> float:
        """The p-value decisions use: the adjusted one when there is one."""
        return self.test.p_value if self.p_adjusted is None else self.p_adjusted

    def adjusted(self, p_adjusted: float) -> PairedDifference:
        return replace(self, p_adjusted=p_adjusted)

    def to_dict(self) -> dict[str, Any]:
        """As in ``sweep_result.yaml`` (resamples and seed are the sweep's own)."""
        return {
            "n": self.n,
            "delta": self.delta,
            "gained": self.test.gained,
            "lost": self.test.lost,
            "interval": [self.test.low, self.test.high],
            "interval_level": self.test.level,
            "p_value": self.test.p_value,
            "p_adjusted": self.p_adjusted,
            "exact": self.test.exact,
            "sign_assignments": self.test.resamples,
            "lost_by_stage": self.lost_by_stage,
        }


Paired = PairedDifference | Unpaired


def paired_difference(
    candidate: CaseValues, reference: CaseValues, resamples: int, seed: int, level: float
) -> Paired:
    """``candidate`` − ``reference`` per case, paired by case id in the candidate's order
    (as ``ragsweep-compare`` pairs them, so seeded p-values agree); ``level``: the
    interval's coverage."""
    only_one = set(candidate.by_case) ^ set(reference.by_case)
    if only_one:
        example = sorted(only_one)[0]
        return Unpaired(f"{len(only_one)} case(s) scored in only one of them (e.g. {example!r})")
    if not candidate.by_case:
        return Unpaired("no answerable case was scored")
    differences = [v - reference.by_case[case] for case, v in candidate.by_case.items()]
    test = paired_randomization_test(differences, resamples, seed, level)
    lost = candidate.lost_by_stage(reference)
    return PairedDifference(len(differences), test.mean_difference, test, lost_by_stage=lost)


def read_case_values(
    objective: str, run_dir: Path | None, run_id: str | None, client: Any | None
) -> CaseValues | Unpaired:
    """The per-case ``objective`` of a configuration: from ``run_dir``'s cases file when it
    exists, else from run ``run_id``'s artifact through the MLflow ``client``."""
    try:
        if run_dir is not None and (run_dir / CASES_FILE).is_file():
            path = run_dir / CASES_FILE
            text = path.read_text(encoding="utf-8")
            return _values(text, objective, str(path))
        if run_id is not None and client is not None:
            text = artifact_text(client, run_id, CASES_FILE)
            return _values(text, objective, f"{CASES_FILE} of run {run_id}")
    except (OSError, ValueError) as exc:
        return Unpaired(str(exc))
    where = f"in {run_dir}" if run_dir is not None else "(no run directory)"
    return Unpaired(f"no {CASES_FILE} {where} and no logged run to read it from")


def _values(text: str, objective: str, source: str) -> CaseValues:
    return CaseValues.from_cases(cases_from_jsonl(text, source), objective, source)
