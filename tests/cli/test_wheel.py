"""ragsweep as a user installs it: the wheel built from this repository, installed into a
fresh virtualenv outside it, run from empty directories (``pytest -m wheel``; part of
``make test``).

Dependencies come from the package index. They are kept as wheels in a wheelhouse
(``$RAGSWEEP_WHEELHOUSE``, default ``~/.cache/ragsweep/wheelhouse``) filled by ``pip wheel``
the first time, so later runs install offline from it in well under a minute; when the
wheelhouse lacks something (new or changed dependencies), it is filled again from the index.
"""

from __future__ import annotations

import json
import os
import shlex
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


USER_DOCS = {
    "install.md": "# Installing Quillpad\n\nDownload the installer from the releases page and "
    "run `quillpad-setup --user` to install without administrator rights.\n\nThe installer "
    "needs **200 MB** of free disk space.\n",
    "sync.md": "# Syncing notes\n\nNotes sync every five minutes while the app is open. To "
    "sync at once, press `Ctrl+S` in any notebook.\n\n## Conflicts\n\nWhen two devices edit "
    "the same note, Quillpad keeps both versions and marks the older one “conflicted”.\n",
    "export.md": "# Exporting\n\nChoose *File > Export* to write a notebook as Markdown or "
    "PDF. Exports of more than 500 notes run in the background and notify you when done.\n",
}
USER_CASES = [
    # quotes as a user copies them from the rendered page: no backticks, no asterisks,
    # straight quotes where the document has typographic ones
    ("q1", "How do I install without admin rights?", "install.md", "run quillpad-setup --user"),
    ("q2", "How much disk space does the installer need?", "install.md", "needs 200 MB of free"),
    ("q3", "How often do notes sync?", "sync.md", "Notes sync every five minutes"),
    ("q4", "How do I sync immediately?", "sync.md", "press Ctrl+S in any notebook"),
    ("q5", "What happens on an edit conflict?", "sync.md", 'marks the older one "conflicted"'),
    ("q6", "How do I export a notebook?", "export.md", "Choose File > Export"),
    ("q7", "What happens with big exports?", "export.md", "run in the background"),
]


def readme_user_commands() -> list[list[str]]:
    """The ragsweep commands of the README's "Use it in your project" block, in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("## Use it in your project", 1)[1].split("```bash", 1)[1]
    lines = [line.split("#", 1)[0].strip() for line in block.split("```", 1)[0].splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("ragsweep")]


def test_the_users_path_as_the_readme_and_init_show_it(
    venv_bin: Path, tmp_path: Path, user_env: dict[str, str]
) -> None:
    """From an empty folder: the README's commands verbatim, with the user's own documents
    and questions put where init's config says, no corpus=/golden= overrides; then init's
    example retriever and a retriever sweep, and ragsweep best."""
    env = {**user_env, "PATH": f"{venv_bin}{os.pathsep}{user_env.get('PATH', '')}"}
    project = tmp_path / "my-eval"
    project.mkdir()
    commands = readme_user_commands()
    assert commands[0] == ["ragsweep", "init"]
    init_out = run(commands[0], cwd=project, env=env)
    assert "next, in this folder:" in init_out
    for name, text in USER_DOCS.items():  # the user's documents replace the examples
        (project / "docs" / name).write_text(text, encoding="utf-8")
    for example in ("example.md", "faq.md"):
        (project / "docs" / example).unlink()
    cases = [
        {"id": i, "question": q, "split": "tuning", "evidence": [{"doc": d, "quote": quote}]}
        for i, q, d, quote in USER_CASES
    ]
    golden = "\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n"
    (project / "golden.jsonl").write_text(golden, encoding="utf-8")
    outputs = {" ".join(c): run(c, cwd=project, env=env) for c in commands[1:]}
    check = " ".join(outputs["ragsweep check sweep=project"].split())
    assert "no problems found" in check
    assert "corpus 3 documents" in check and str(project / "docs") in check
    assert f"golden 7 cases {project / 'golden.jsonl'}" in check
    single = outputs["ragsweep"]
    assert str(project / "golden.jsonl") in " ".join(single.split())
    assert "final recall_at_2000c =" in outputs["ragsweep -m sweep=project"]
    best = outputs["ragsweep best"]
    assert "sweep project" in best and "reproduce:" in best
    # the user's own retriever, as init --example prints it
    example = run(["ragsweep", "init", "--example", "retriever"], cwd=project, env=env)
    (printed,) = [line.strip() for line in example.splitlines() if "TfidfRetriever" in line]
    assert "recall_at_2000c" in run(shlex.split(printed), cwd=project, env=env)
    # a sweep choosing a retriever: one factor
    (project / "sweeps" / "retrievers.yaml").write_text(
        "axes:\n  - embedding: [bm25, use_m3]\nobjective: recall_at_2000c\n", encoding="utf-8"
    )
    out = run(["ragsweep", "-m", "sweep=retrievers"], cwd=project, env=env)
    assert "final recall_at_2000c =" in out
    assert "sweep retrievers" in run(["ragsweep", "best"], cwd=project, env=env)
