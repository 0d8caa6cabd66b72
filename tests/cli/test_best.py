"""``ragsweep best``, the grid's end table and the one line per job, as a user runs them:
real sweeps and grids of the bundled demo data in subprocesses (tracking off)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragsweep.sweep.report import p_text

RAGSWEEP = Path(sys.executable).parent / "ragsweep"


def ragsweep(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": "", "RAGSWEEP_ROOT": str(cwd), "COLUMNS": "100"}
    return subprocess.run(
        [str(RAGSWEEP), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


def multirun(cwd: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = ragsweep(
        "-m", *args, f"hydra.sweep.dir=outputs/multirun/{name}", "tracking=off", cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return done


def report_interval(run_dir: Path, metric: str) -> str:
    """``[0.3174, 0.4471]``: the interval of ``metric`` in the run's report.md."""
    match = re.search(
        rf"^\| {metric} \| \S+ \| (\[[^]]+\]) \|$", (run_dir / "report.md").read_text(), re.M
    )
    assert match, run_dir
    return match.group(1)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project folder with a finished sweep (``grid_small``) and a grid."""
    root = tmp_path_factory.mktemp("best")
    sweep = multirun(root, "sweep", "sweep=grid_small")
    (root / "sweep.out").write_text(sweep.stdout + sweep.stderr, encoding="utf-8")
    grid = multirun(root, "grid", "chunking.size=400,800", "chunking.overlap=0,100")
    (root / "grid.out").write_text(grid.stdout + grid.stderr, encoding="utf-8")
    return root


def test_best_prints_the_last_sweeps_choice_and_its_command(project: Path) -> None:
    done = ragsweep("best", cwd=project)
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    result = yaml.safe_load((project / "outputs/multirun/sweep/sweep_result.yaml").read_text())
    final = result["final"]
    assert out.startswith("sweep grid_small (")
    assert f"folder {project / 'outputs/multirun/sweep'}" in out
    assert f"recall_at_5 (maximize) = {final['objective']:.4f} [" in out
    assert "chunking.size=800 preprocess=nfkc" in out and "vs start" in out and " p " in out
    (decided,) = result["axes"]  # the adjusted p the decision used, beside the raw one
    start = next(t for t in decided["trials"] if t["incumbent"])
    assert f"(adjusted {p_text(start['vs_chosen']['p_adjusted'])})" in out
    assert done.stdout.rstrip().splitlines()[-1] == "reproduce: " + final["command"]
    # the interval is the chosen job's own, as its report.md shows it
    low, high = report_interval(Path(final["run_dir"]), "recall_at_5").strip("[]").split(", ")
    assert f"[{float(low):.3f}, {float(high):.3f}]" in out


def test_best_json_and_an_explicit_folder(project: Path) -> None:
    done = ragsweep("best", "outputs/multirun/sweep", "--json", cwd=project)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["chosen"] == {"chunking.size × preprocess": "chunking.size=800 preprocess=nfkc"}
    assert data["command"] == "ragsweep tracking=off chunking.size=800 preprocess=nfkc"
    low, high = data["interval"]
    assert low < data["value"] < high


def test_best_does_not_import_mlflow_for_a_folder(project: Path) -> None:
    code = (
        "import sys; from ragsweep.cli.best import main; "
        "main(['outputs/multirun/sweep']); assert 'mlflow' not in sys.modules, 'mlflow'"
    )
    env = {**os.environ, "RAGSWEEP_ROOT": str(project)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=project, env=env
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([""], "an empty argument names no sweep"),
        (["outputs/multirun/grid"], "no sweep_result.yaml in outputs/multirun/grid"),
        (["no-such-thing"], "no such folder, and not an MLflow run id"),
        (
            ["0123456789abcdef0123456789abcdef", "--tracking-uri", "sqlite:///nope.db"],
            "no MLflow store",
        ),
    ],
)
def test_best_errors_exit_2(project: Path, args: list[str], message: str) -> None:
    done = ragsweep("best", *args, cwd=project)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr


def test_best_without_any_finished_sweep(tmp_path: Path) -> None:
    done = ragsweep("best", cwd=tmp_path)
    assert done.returncode == 2 and "no finished sweep under" in done.stderr


def test_an_unfinished_sweep_is_refused(project: Path, tmp_path: Path) -> None:
    folder = tmp_path / "stopped"
    folder.mkdir()
    data = yaml.safe_load((project / "outputs/multirun/sweep/sweep_result.yaml").read_text())
    (folder / "sweep_result.yaml").write_text(
        yaml.safe_dump({**data, "complete": False, "final": None})
    )
    done = ragsweep("best", str(folder), cwd=project)
    assert done.returncode == 2 and "did not finish" in done.stderr


def test_a_grid_ends_with_its_table_best_first(project: Path) -> None:
    out = (project / "grid.out").read_text(encoding="utf-8")
    folder = project / "outputs/multirun/grid"
    rows = re.findall(
        r"^(✓|\s) (\d)\s+(chunking\.size=\d+ chunking\.overlap=\d+)\s+(0\.\d{4})\s+(\[[^]]+\])",
        out,
        re.M,
    )
    assert len(rows) == 4, out
    means = [float(r[3]) for r in rows]
    assert means == sorted(means, reverse=True) and rows[0][0] == "✓"
    for _, job, _, mean, interval in rows:  # each row is its job's own report
        report = (folder / job / "report.md").read_text()
        assert f"| recall_at_5 | {mean} |" in report
        low, high = report_interval(folder / job, "recall_at_5").strip("[]").split(", ")
        assert interval == f"[{float(low):.3f}, {float(high):.3f}]"
    assert "recall_at_5 (maximize; eval.objective, the default objective of sweeps)" in " ".join(
        out.split()
    )
    summary = (folder / "sweep_summary.md").read_text(encoding="utf-8")
    assert f"| ✓ {rows[0][1]} | {rows[0][2]} | {rows[0][3]} |" in summary
    assert f"reproduce: ragsweep {rows[0][2]} tracking=off" in summary


def test_each_job_prints_one_line_and_report_md_holds_the_summary(project: Path) -> None:
    for name in ("sweep", "grid"):
        out = (project / f"{name}.out").read_text(encoding="utf-8")
        jobs = re.findall(r"^job (\d) .* recall_at_5 = 0\.\d{4} \[", out, re.M)
        assert sorted(jobs) == ["0", "1", "2", "3"], out
        assert "ragsweep run: mean [95% interval]" not in out  # no full summary
        assert all((project / "outputs/multirun" / name / j / "report.md").is_file() for j in jobs)
    assert len((project / "grid.out").read_text().splitlines()) < 45


def test_verbose_prints_each_jobs_summary(tmp_path: Path) -> None:
    done = multirun(tmp_path, "v", "-v", "chunking.size=400,800")
    assert done.stderr.count("ragsweep run: mean [95% interval]") == 2
    assert not re.search(r"^job \d ", done.stdout, re.M)
    assert "grid of 2 configuration(s)" in done.stdout
    # -v chooses how to print, not what to run: not in the command that reproduces
    (line,) = [x for x in done.stdout.splitlines() if x.strip().startswith("reproduce:")]
    assert "verbose" not in line and "chunking.size=" in line


def test_a_damaged_newer_result_is_passed_over(project: Path, tmp_path: Path) -> None:
    """A sweep killed while writing its result (or any unreadable sweep_result.yaml) does
    not hide the last finished sweep."""
    root = tmp_path / "p"
    for name in ("sweep", "later"):
        (root / "outputs/multirun" / name).mkdir(parents=True)
    good = (project / "outputs/multirun/sweep/sweep_result.yaml").read_text()
    (root / "outputs/multirun/sweep/sweep_result.yaml").write_text(good)
    (root / "outputs/multirun/later/sweep_result.yaml").write_text(good[: len(good) // 3] + "[")
    done = ragsweep("best", cwd=root)
    assert done.returncode == 0, done.stderr
    assert "outputs/multirun/sweep" in done.stdout


def test_a_broken_project_config_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "conf" / "project").mkdir(parents=True)
    (tmp_path / "conf" / "project" / "default.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /corpus: nosuch\n"
    )
    done = ragsweep("best", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert "nosuch" in done.stderr
