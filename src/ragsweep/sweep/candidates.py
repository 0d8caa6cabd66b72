"""What a decision sees of a sweep's evaluated configurations (:class:`Candidate`): the
objective, the per-case values (read once per sweep, from the job's run directory or its
logged run) and, on a corpus with access metadata, whether it leaked."""

from __future__ import annotations

from typing import Any

from ragsweep.sweep.paired import CaseValues, Unpaired, read_case_values
from ragsweep.sweep.select import Candidate
from ragsweep.sweep.state import SweepState


class Candidates:
    """Candidates of one sweep: ``objective`` its objective's name, ``access`` whether the
    corpus has access metadata (a value's leaks must then be known for it to be adopted),
    ``client`` the MLflow client of its parent run (None: tracking off)."""

    def __init__(self, state: SweepState, objective: str, access: bool, client: Any | None):
        self.state = state
        self.objective = objective
        self.access = access
        self.client = client

    def of(self, config_hash: str | None, objective: float | None) -> Candidate:
        """The candidate of configuration ``config_hash`` with ``objective`` (None: failed
        or invalid)."""
        if objective is None or config_hash is None:
            return Candidate(None, config_hash, None)
        cases = self.case_values(config_hash)
        leaks = None
        if self.access:  # from its cases, else from its summary's logged metric
            logged = self.state.evaluated[config_hash].acl_leaks
            leaks = cases.leaks if isinstance(cases, CaseValues) else logged
        return Candidate(objective, config_hash, cases, leaks, self.access)

    def leaked(self, config_hash: str) -> bool:
        """Whether an evaluated configuration may never be adopted (it leaked, or on a
        corpus with access metadata its leaks are unknown); False without access metadata,
        where nothing is read."""
        if not self.access:
            return False
        return self.of(config_hash, self.state.evaluated[config_hash].objective).leaked

    def case_values(self, config_hash: str) -> CaseValues | Unpaired:
        """The per-case objective of an evaluated configuration (read once per sweep)."""
        if config_hash not in self.state.cases:
            known = self.state.evaluated[config_hash]
            self.state.cases[config_hash] = read_case_values(
                self.objective, known.run_dir, known.run_id, self.client
            )
        return self.state.cases[config_hash]
