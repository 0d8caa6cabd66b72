"""Each job of a sweep composed once (:mod:`ragsweep.sweep.reuse`): Hydra's basic launcher
runs the config the sweep composed to check the job, and composes nothing itself."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hydra import initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.global_hydra import GlobalHydra
from hydra.core.utils import JobStatus
from hydra.types import RunMode
from omegaconf import DictConfig

from ragsweep.config.app import config_dir
from ragsweep.sweep.result import SweepResult
from ragsweep.sweep.reuse import ReusingLoader
from tests.sweep.test_sweep import FAKE_SWEEP, FakeTask, multirun, write_sweep


def test_the_launcher_runs_the_configs_the_sweep_composed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    composed_by_hydra: list[tuple[str, ...]] = []
    real_compose = ConfigLoaderImpl.load_sweep_config

    def counted(self: ConfigLoaderImpl, master: DictConfig, overrides: list[str]) -> DictConfig:
        composed_by_hydra.append(tuple(overrides))
        return real_compose(self, master, overrides)

    task = FakeTask()
    monkeypatch.setattr(ConfigLoaderImpl, "load_sweep_config", counted)
    sweep = write_sweep(tmp_path, FAKE_SWEEP)
    result = multirun(task, tmp_path, "s1", f"sweep={sweep}", "tracking.enabled=false")

    assert isinstance(result, SweepResult) and result.final is not None
    assert len(task.calls) == 9  # the nine configurations of the sweep, as without reuse
    # Hydra composed each configuration once: the sweep's checks and its launcher share it
    assert len(composed_by_hydra) == len(set(composed_by_hydra))
    assert result.final.objective == pytest.approx(0.575)


def test_a_config_is_taken_once_and_other_processes_compose_their_own() -> None:
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3", job_name="t"):
        hydra_loader = GlobalHydra.instance().config_loader()
        master = hydra_loader.load_configuration("config", [], RunMode.MULTIRUN)
        reusing = ReusingLoader(hydra_loader)
        first = reusing.compose(master, ["chunking.size=400"])
        assert reusing.load_sweep_config(master, ["chunking.size=400"]) is first
        again = reusing.load_sweep_config(master, ["chunking.size=400"])  # taken once only
        assert again is not first and again.chunking.size == 400
        other = reusing.load_sweep_config(master, ["chunking.size=800"])  # never kept
        assert other.chunking.size == 800 and reusing.reused == 1
        reusing.compose(master, ["chunking.size=1200"])
        sent = pickle.loads(pickle.dumps(reusing))  # as joblib sends it to its workers
        assert sent.reused == 0 and not sent._kept
        assert sent.load_sweep_config(master, ["chunking.size=1200"]).chunking.size == 1200


def test_a_grid_that_lists_a_value_twice_runs_both_jobs(tmp_path: Path) -> None:
    task = FakeTask()
    returns = multirun(task, tmp_path, "g", "chunking.size=400,400", "tracking.enabled=false")
    assert len(task.calls) == 2 and task.calls[0] == task.calls[1]
    jobs = [ret for batch in returns for ret in batch]
    assert [ret.status for ret in jobs] == [JobStatus.COMPLETED] * 2
    assert jobs[0].return_value == jobs[1].return_value
