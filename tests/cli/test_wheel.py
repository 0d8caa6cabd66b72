"""ragsweep as a user installs it: the wheel built from this repository, installed into a
fresh virtualenv outside it, run from empty directories (``pytest -m wheel``; part of
``make test``).

Dependencies come from the package index. They are kept as wheels in a wheelhouse
(``$RAGSWEEP_WHEELHOUSE``, default ``~/.cache/ragsweep/wheelhouse``) filled by ``pip wheel``
the first time, so later runs install offline from it in well under a minute; when the
wheelhouse lacks something (new or changed dependencies), it is filled again from the index.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from ragsweep.cli.init import EXAMPLE_DOCS

pytestmark = pytest.mark.wheel

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = Path(
    os.environ.get("RAGSWEEP_WHEELHOUSE") or Path.home() / ".cache" / "ragsweep" / "wheelhouse"
)
NOT_BUILT = [".git", ".venv", "outputs", "build", "dist", "eval_logs", "multirun", "mlruns"]
NOT_BUILT_PATTERNS = ["__pycache__", "*.egg-info", ".*_cache", "*.pyc"]
DATA_FOLDERS = ("conf", "sweeps", "demo")
TIMEOUT_S = 600


def run(args: list[str | Path], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command; fail the test with its output unless it exits 0."""
    out = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert out.returncode == 0, f"{args} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the work tree (a build in the repo would leave
    build/ behind, whose stale files setuptools puts into later wheels)."""
    source = tmp_path_factory.mktemp("source") / "ragsweep"
    shutil.copytree(
        REPO,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(*NOT_BUILT, *NOT_BUILT_PATTERNS),
    )
    dist = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, source], cwd=dist)
    (built,) = dist.glob("ragsweep-*.whl")
    return built


def _install(pip: Path, wheel: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [pip, "install", "-q", "--no-compile", "--no-index", "--find-links", WHEELHOUSE, wheel],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="module")
def venv_bin(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``bin/`` of a fresh virtualenv (outside the repo) with the wheel installed."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    run([sys.executable, "-m", "venv", venv], cwd=venv.parent)
    pip = venv / "bin" / "pip"
    if _install(pip, wheel, venv.parent).returncode != 0:  # fill the wheelhouse: the index
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        run([pip, "wheel", "-q", "-w", WHEELHOUSE, wheel], cwd=venv.parent)
        for own in WHEELHOUSE.glob("ragsweep-*.whl"):
            own.unlink()
        installed = _install(pip, wheel, venv.parent)
        assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv / "bin"


@pytest.fixture
def user_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A user's environment: no ragsweep variables, MLflow into a store under tmp_path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RAGSWEEP_", "VIRTUAL_ENV", "PYTHON", "MLFLOW_"))
    }
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()
    yield env


def package_files(venv_bin: Path) -> set[Path]:
    """Every file of the installed package except bytecode caches."""
    (package,) = venv_bin.parent.glob("lib/python*/site-packages/ragsweep")
    return {p for p in package.rglob("*") if "__pycache__" not in p.parts}


def test_the_wheel_holds_every_config_sweep_and_demo_file(wheel: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", *DATA_FOLDERS], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    expected = {f"ragsweep/_data/{path}" for path in tracked}
    assert len(expected) > 50  # conf groups, two sweeps, the demo corpus and golden set
    names = set(zipfile.ZipFile(wheel).namelist())
    assert expected - names == set()
    assert "hydra_plugins/ragsweep_searchpath/searchpath.py" in names


def test_init_and_check_from_an_empty_directory(
    venv_bin: Path, tmp_path: Path, user_env: dict[str, str]
) -> None:
    ragsweep = venv_bin / "ragsweep"
    empty = tmp_path / "empty"
    empty.mkdir()
    before = package_files(venv_bin)
    out = run([ragsweep, "check"], cwd=empty, env=user_env)
    documents = len([p for p in (REPO / "demo" / "corpus").rglob("*") if p.is_file()])
    cases = len((REPO / "demo" / "golden.jsonl").read_text(encoding="utf-8").splitlines())
    assert "no problems found" in out
    assert f"corpus    {documents} documents" in out
    assert f"golden    {cases} cases" in out
    assert "ragsweep/_data/demo" in out  # the packaged demo data
    assert list(empty.iterdir()) == []  # check writes nothing

    run([ragsweep, "init", "project", "--name", "handbook"], cwd=empty, env=user_env)
    project = empty / "project"
    assert (project / "conf" / "corpus" / "handbook.yaml").is_file()
    out = run(
        [ragsweep, "check", "corpus=handbook", "golden=handbook", "sweep=handbook"],
        cwd=project,
        env=user_env,
    )
    chars = sum(len(text) for text in EXAMPLE_DOCS.values())
    words = " ".join(out.split())  # a long path goes to its own line at 80 columns
    assert f"corpus 2 documents, {chars} characters {project / 'docs'}" in words
    assert f"sweep handbook {project / 'sweeps' / 'handbook.yaml'}" in words
    assert package_files(venv_bin) == before


def test_a_run_and_a_one_axis_sweep_from_an_empty_directory(
    venv_bin: Path, tmp_path: Path, user_env: dict[str, str]
) -> None:
    ragsweep = venv_bin / "ragsweep"
    work = tmp_path / "work"
    work.mkdir()
    before = package_files(venv_bin)
    run([ragsweep, "tracking.run_name=installed"], cwd=work, env=user_env)
    out = run([ragsweep, "-m", "sweep=chunking"], cwd=work, env=user_env)
    assert "final recall_at_2000c =" in out
    assert package_files(venv_bin) == before  # nothing written into the installed package
    assert {"runs", "multirun"} <= {p.name for p in (work / "outputs").iterdir()}
    (run_dir,) = (work / "outputs" / "runs").glob("*/*")
    assert (run_dir / "report.md").is_file()
    store = user_env["MLFLOW_TRACKING_URI"].removeprefix("sqlite:///")
    with closing(sqlite3.connect(store)) as db:
        names = {row[0] for row in db.execute("SELECT name FROM runs")}
        best = db.execute(
            "SELECT COUNT(*) FROM tags WHERE key = 'ragsweep.best' AND value = 'true'"
        ).fetchone()[0]
    assert "installed" in names
    assert best == 1
