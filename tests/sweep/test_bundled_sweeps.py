"""Every sweep file shipped in ``sweeps/`` runs end to end on the demo data, with the real
pipeline and the extras it needs (the retrieval sweep: sentence-transformers and a seeded
random cross-encoder), and passes ``ragsweep check``: a shipped sweep cannot crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsweep.check import run_checks
from ragsweep.sweep.result import SweepResult
from tests.st_support import needs_st, tiny_cross_encoder
from tests.sweep.test_sweep import multirun, real_task

REPO_SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
BUNDLED = sorted(p.stem for p in REPO_SWEEPS.glob("*.yaml"))
# What a sweep needs besides the demo data: extra overrides, and the marks they need.
RERANKER = "rerank.model={ce}"
NEEDS: dict[str, tuple[tuple[str, ...], tuple[pytest.MarkDecorator, ...]]] = {
    "retrieval": ((RERANKER,), (needs_st, pytest.mark.slow)),
    "chunking": ((), (pytest.mark.slow,)),
}


def test_every_bundled_sweep_is_covered() -> None:
    assert BUNDLED == ["chunking", "grid_small", "retrieval"]


@pytest.fixture(scope="module")
def reranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A seeded random cross-encoder, built only when a test needs it."""
    return tiny_cross_encoder(tmp_path_factory.mktemp("ce") / "tiny-ce")


def overrides_of(name: str, request: pytest.FixtureRequest) -> list[str]:
    extra = NEEDS.get(name, ((), ()))[0]
    if not any("{ce}" in line for line in extra):
        return list(extra)
    folder = request.getfixturevalue("reranker")
    return [line.format(ce=folder) for line in extra]


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=NEEDS.get(n, ((), ()))[1]) for n in BUNDLED]
)
def test_bundled_sweep_passes_check_and_runs(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    extra = overrides_of(name, request)
    found = run_checks([f"sweep={name}", "tracking=off", *extra])
    assert [str(p) for p in found.problems] == []

    result = multirun(real_task, tmp_path, "s", f"sweep={name}", "tracking=off", *extra)
    assert isinstance(result, SweepResult)
    assert result.final is not None and result.final.objective is not None
    spec = result.spec
    assert len(result.axes) == len(spec.axes)
    for axis in result.axes:
        assert axis.chosen is not None
        assert all(t.status != "failed" for t in axis.trials), axis.trials
    assert (tmp_path / "s" / "sweep_result.yaml").is_file()
