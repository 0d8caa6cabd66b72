"""MLflow logging details that the end-to-end tests cannot force: races between jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragsweep.tracking.log import DATASET_ATTEMPTS, DatasetInput, _log_dataset


class RacingClient:
    """Fails ``log_inputs`` the way MLflow does when another job inserted the same dataset
    between this job's lookup and insert, ``failures`` times, then succeeds."""

    def __init__(self, failures: int, message: str) -> None:
        self.failures = failures
        self.message = message
        self.calls = 0

    def log_inputs(self, run_id: str, datasets: list[Any]) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(self.message)


def _dataset(tmp_path: Path) -> DatasetInput:
    path = tmp_path / "golden.jsonl"
    path.write_text("{}\n", encoding="utf-8")
    return DatasetInput(str(path), "golden", "0" * 64, "tuning")


RACE = "(sqlite3.IntegrityError) UNIQUE constraint failed: datasets.experiment_id"


def test_a_dataset_inserted_by_a_parallel_job_is_linked_on_retry(tmp_path: Path) -> None:
    client = RacingClient(failures=1, message=RACE)
    _log_dataset(client, "run", _dataset(tmp_path))
    assert client.calls == 2


def test_other_errors_and_a_lasting_race_are_raised(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="disk I/O error"):
        _log_dataset(RacingClient(failures=1, message="disk I/O error"), "run", _dataset(tmp_path))
    lasting = RacingClient(failures=DATASET_ATTEMPTS, message=RACE)
    with pytest.raises(RuntimeError, match="UNIQUE constraint failed"):
        _log_dataset(lasting, "run", _dataset(tmp_path))
    assert lasting.calls == DATASET_ATTEMPTS
