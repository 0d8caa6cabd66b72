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
SUBSET = "golden.path={subset}"
"""Every fourth demo case: the retrieval sweep's reranker scores every candidate of every
case in nine jobs, and what can crash does not depend on how many cases there are."""
NEEDS: dict[str, tuple[tuple[str, ...], tuple[pytest.MarkDecorator, ...]]] = {
    "retrieval": ((RERANKER, SUBSET), (needs_st, pytest.mark.slow)),
    "chunking": ((), (pytest.mark.slow,)),
}


ELSEWHERE = {
    "access": "tests/sweep/test_sweep_access.py",
    "chunking_search": "tests/sweep/test_search.py",
}
"""Bundled sweeps run end to end (and checked) by a test of their own."""


def test_every_bundled_sweep_is_covered() -> None:
    assert BUNDLED == ["access", "chunking", "chunking_search", "grid_small", "retrieval"]


@pytest.fixture(scope="module")
def reranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A seeded random cross-encoder, built only when a test needs it."""
    return tiny_cross_encoder(tmp_path_factory.mktemp("ce") / "tiny-ce")


@pytest.fixture(scope="module")
def subset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A quarter of the demo golden set (both splits), as its own file."""
    lines = (REPO_SWEEPS.parent / "demo" / "golden.jsonl").read_text(encoding="utf-8")
    path = tmp_path_factory.mktemp("golden") / "golden.jsonl"
    path.write_text("".join(lines.splitlines(keepends=True)[::4]), encoding="utf-8")
    return path


def overrides_of(name: str, request: pytest.FixtureRequest) -> list[str]:
    extra = NEEDS.get(name, ((), ()))[0]
    fixtures = {"ce": "reranker", "subset": "subset"}
    values = {
        key: request.getfixturevalue(fixture)
        for key, fixture in fixtures.items()
        if any(f"{{{key}}}" in line for line in extra)
    }
    return [line.format(**values) for line in extra]


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=NEEDS.get(n, ((), ()))[1]) for n in BUNDLED if n not in ELSEWHERE],
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
