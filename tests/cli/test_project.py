"""Packaged defaults and a user's project: what the package lists, where config, sweeps,
thresholds and outputs are looked up, and that a project's files come first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra._internal.config_search_path_impl import ConfigSearchPathImpl

from hydra_plugins.ragsweep_searchpath.searchpath import PROVIDER, RagsweepSearchPath
from ragsweep.config.app import (
    CONFIG_PATH,
    ROOT_ENV,
    compose,
    config_dir,
    data_dir,
    import_project,
    project_defaults_file,
    sweep_dirs,
)
from ragsweep.release.thresholds import default_path, project_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest's own dependency there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
RAGSWEEP = Path(sys.executable).parent / "ragsweep"


def ragsweep(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAGSWEEP_")}
    return subprocess.run(
        [str(RAGSWEEP), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, **env},
        timeout=300,
        check=False,
    )


def job_config(*args: str, cwd: Path, **env: str) -> dict[str, Any]:
    """``ragsweep --cfg job --resolve ARGS`` as data."""
    out = ragsweep("--cfg", "job", "--resolve", *args, cwd=cwd, **env)
    assert out.returncode == 0, out.stderr
    return dict(yaml.safe_load(out.stdout))


def run_reports(folder: Path) -> list[str]:
    """The ``report.md`` texts of the runs below ``folder``."""
    return [p.read_text(encoding="utf-8") for p in sorted(folder.rglob("report.md"))]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_pyproject_lists_every_package_under_src() -> None:
    """The package list is explicit (pyproject.toml says why): a package missing from it
    would be missing from the wheel."""
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    src = REPO / "src"
    found = {
        ".".join(init.parent.relative_to(src).parts)
        for init in src.rglob("__init__.py")
        if init.resolve().is_relative_to(src)  # not through the links into conf/ etc.
    }
    data = {"ragsweep._data.conf", "ragsweep._data.sweeps", "ragsweep._data.demo"}
    assert listed == found | data


def test_packaged_data_is_the_repository_folders_in_an_editable_install() -> None:
    assert data_dir() == REPO
    assert config_dir() == REPO / "conf"
    for name in ("conf", "sweeps", "demo"):
        link = REPO / "src" / "ragsweep" / "_data" / name
        assert link.is_symlink() and link.resolve() == REPO / name


def test_a_project_conf_adds_options_and_replaces_packaged_files(tmp_path: Path) -> None:
    write(tmp_path / "conf/corpus/handbook.yaml", "name: handbook\npath: ${paths.root_dir}/hb\n")
    write(
        tmp_path / "conf/eval/default.yaml",
        "ks: [1, 2]\nsplit: tuning\nmin_span_overlap: 1.0\nobjective: recall_at_2\n",
    )
    cfg = job_config("corpus=handbook", cwd=tmp_path)
    assert cfg["corpus"] == {"name": "handbook", "path": f"{tmp_path}/hb"}
    assert cfg["eval"] == {"ks": [1, 2], "split": "tuning", "min_span_overlap": 1.0,
                           "objective": "recall_at_2"}  # fmt: skip
    assert cfg["paths"]["output_dir"] == f"{tmp_path}/outputs"
    assert cfg["paths"]["demo_dir"] == str(REPO / "demo")


def test_config_dir_comes_before_the_project_conf_and_the_defaults(tmp_path: Path) -> None:
    write(tmp_path / "conf/chunking/fixed.yaml", "mode: fixed\nsize: 500\noverlap: 50\n")
    write(tmp_path / "extra/chunking/fixed.yaml", "mode: fixed\nsize: 300\noverlap: 30\n")
    assert job_config(cwd=tmp_path)["chunking"] == {"mode": "fixed", "size": 500, "overlap": 50}
    for flag in (["--config-dir", "extra"], ["--config-dir=extra"], ["-cd", "extra"]):
        cfg = job_config(*flag, cwd=tmp_path)
        assert cfg["chunking"] == {"mode": "fixed", "size": 300, "overlap": 30}
    out = ragsweep("--config-dir", "nowhere", cwd=tmp_path)
    assert out.returncode == 2
    assert "error: --config-dir 'nowhere': no such folder" in out.stderr


def test_ragsweep_root_names_the_project(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write(project / "conf/corpus/mine.yaml", "name: mine\npath: ${paths.root_dir}/docs\n")
    cfg = job_config("corpus=mine", cwd=tmp_path, RAGSWEEP_ROOT=str(project))
    assert cfg["corpus"] == {"name": "mine", "path": f"{project}/docs"}
    assert cfg["paths"]["output_dir"] == f"{project}/outputs"


def test_the_search_path_plugin_leaves_other_hydra_apps_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAGSWEEP_ROOT", raising=False)
    monkeypatch.delenv("RAGSWEEP_CONF_DIR", raising=False)
    ours, other = ConfigSearchPathImpl(), ConfigSearchPathImpl()
    ours.append("main", CONFIG_PATH)
    other.append("main", f"file://{tmp_path / 'app'}")
    for search_path in (ours, other):
        RagsweepSearchPath().manipulate_search_path(search_path)
    assert [(e.provider, e.path) for e in ours.get_path()] == [
        (PROVIDER, f"file://{tmp_path / 'conf'}"),
        ("main", CONFIG_PATH),
    ]
    assert [e.provider for e in other.get_path()] == ["main"]


def test_sweeps_are_looked_up_in_the_project_then_bundled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAGSWEEP_ROOT", raising=False)
    assert sweep_dirs() == [tmp_path / "sweeps", REPO / "sweeps"]
    assert sweep_dirs(REPO / "sweeps") == [REPO / "sweeps"]


def test_thresholds_in_force_and_the_file_the_ratchet_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAGSWEEP_ROOT", raising=False)
    monkeypatch.delenv("RAGSWEEP_GATE_THRESHOLDS", raising=False)
    packaged = REPO / "conf" / "gate" / "thresholds.yaml"
    own = tmp_path / "conf" / "gate" / "thresholds.yaml"
    assert (default_path(), project_path()) == (packaged, own)
    write(own, packaged.read_text(encoding="utf-8"))
    assert (default_path(), project_path()) == (own, own)


PROJECT_DEFAULTS = """\
# @package _global_
defaults:
  - override /corpus: mine
  - override /golden: mine
"""


def project_with_defaults(root: Path) -> Path:
    """A project folder whose defaults choose its own corpus and golden options."""
    write(root / "conf/corpus/mine.yaml", "name: mine\npath: ${paths.root_dir}/docs\n")
    write(root / "conf/golden/mine.yaml", "path: ${paths.root_dir}/golden.jsonl\n")
    write(project_defaults_file(root), PROJECT_DEFAULTS)
    return root


def test_a_project_chooses_its_corpus_and_golden_set_by_default(tmp_path: Path) -> None:
    project = project_with_defaults(tmp_path / "proj")
    cfg = job_config(cwd=project)
    assert cfg["corpus"] == {**cfg["corpus"], "name": "mine", "path": f"{project}/docs"}
    assert cfg["golden"]["path"] == f"{project}/golden.jsonl"
    demo = job_config("corpus=demo", "golden=demo", cwd=project)  # the command line wins
    assert demo["corpus"]["name"] == "demo"
    assert demo["golden"]["path"] == str(data_dir() / "demo" / "golden.jsonl")
    project_defaults_file(project).unlink()  # an older project: explicit options only
    assert job_config(cwd=project)["corpus"]["name"] == "demo"
    assert job_config("corpus=mine", cwd=project)["corpus"]["name"] == "mine"


def test_without_a_project_the_demo_config_is_unchanged(tmp_path: Path) -> None:
    local = ("paths", "cache", "tracking")  # folders below the project, nothing else
    elsewhere = {k: v for k, v in job_config(cwd=tmp_path).items() if k not in local}
    assert elsewhere["corpus"]["path"] == str(data_dir() / "demo" / "corpus")
    assert elsewhere == {k: v for k, v in job_config(cwd=REPO).items() if k not in local}


def test_compose_uses_the_project_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = project_with_defaults(tmp_path)
    monkeypatch.setenv(ROOT_ENV, str(project))
    assert compose().corpus.name == "mine"  # what promote, compare and check compose
    assert compose(["corpus=demo"]).corpus.name == "demo"


def test_the_project_goes_last_on_sys_path_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ROOT_ENV, str(tmp_path))
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p])
    assert import_project() == str(tmp_path.resolve())
    assert import_project() == str(tmp_path.resolve())
    assert sys.path.count(str(tmp_path.resolve())) == 1
    assert sys.path[-1] == str(tmp_path.resolve())


def test_a_retriever_in_the_project_folder_imports_in_runs_and_jobs(tmp_path: Path) -> None:
    assert ragsweep("init", cwd=tmp_path).returncode == 0
    write(tmp_path / "mine" / "retr.py", (REPO / "tests" / "custom_retriever.py").read_text())
    target = ("embedding=custom", "embedding.options._target_=mine.retr.TfidfRetriever")
    run = ragsweep(*target, "tracking=off", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    jobs = ragsweep(
        "-m", *target, "chunking.size=400,800", "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2", "tracking=off", cwd=tmp_path,
    )  # fmt: skip
    assert jobs.returncode == 0, jobs.stderr
    reports = run_reports(tmp_path / "outputs")
    assert len(reports) == 3
    assert all("- **model**: custom:mine.retr.TfidfRetriever v1" in r for r in reports)


def test_a_sweep_in_a_project_runs_on_its_corpus(tmp_path: Path) -> None:
    assert ragsweep("init", cwd=tmp_path).returncode == 0
    write(
        tmp_path / "sweeps" / "sizes.yaml",
        "baseline: {}\naxes:\n  - chunking.size: [400, 800]\nobjective: recall_at_5\n",
    )
    sweep = ragsweep("-m", "sweep=sizes", "tracking=off", cwd=tmp_path)
    assert sweep.returncode == 0, sweep.stderr
    reports = run_reports(tmp_path / "outputs" / "multirun")
    assert len(reports) == 2
    assert all(f"- **corpus**: {tmp_path / 'docs'}" in r for r in reports)
