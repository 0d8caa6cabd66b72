"""What a user reads in an 80-column capture (``COLUMNS=80``, stdout and stderr a pipe, as
in CI logs): the real console scripts on the demo data, every line at most 80 columns,
nothing ellipsized, and the figures a decision rests on printed whole. Plus the helpers
of :mod:`ragsweep.core.terminal` on their own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient
from rich.cells import cell_len

from ragsweep.cli.golden import slice_stats
from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.core.terminal import column_groups, command_lines, fit_markdown, wrap
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import load_golden
from ragsweep.eval.power import PowerAssumptions
from ragsweep.run.report import markdown_tables
from ragsweep.sweep.report import p_text

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
WIDTH = 80
# Figures as ragsweep prints them: a 4-decimal mean, a signed difference, an interval.
FIGURE = re.compile(r"[-+]?\d+\.\d+")


def run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``script args`` as a user's pipe sees it: 80 columns, output captured."""
    env = {**os.environ, "COLUMNS": str(WIDTH), "MLFLOW_TRACKING_URI": ""}
    env.pop("LINES", None)
    return subprocess.run(
        [str(BIN / script), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


def short_folder() -> Path:
    """A new folder with a short path: the outputs print their paths, and a path is never
    broken, so pytest's long tmp_path would be one word wider than the terminal."""
    return Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))


@pytest.fixture
def project() -> Iterator[Path]:
    folder = short_folder()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def assert_fits(text: str) -> None:
    """Every line at most :data:`WIDTH` terminal cells, and no ``…`` (rich's sign of a
    cell it cut) anywhere."""
    too_wide = [line for line in text.splitlines() if cell_len(line) > WIDTH]
    assert not too_wide, "\n".join(too_wide)
    assert "…" not in text, text


def lines_with(text: str, start: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith(start)]


def overall_means(report_md: str) -> dict[str, str]:
    """``metric → value`` of report.md's overall table (4 decimals, as written)."""
    section = report_md.split("## Overall", 1)[1].split("##", 1)[0]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| ")]
    return {name.strip(): value.strip() for name, value in rows if name.strip() != "metric"}


# -- the console scripts -------------------------------------------------------------------


def test_a_run_summary_fits_and_shows_every_headline_mean(project: Path) -> None:
    out = run("ragsweep", "tracking=off", cwd=project)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_fits(out.stdout + out.stderr)
    (report,) = (project / "outputs" / "runs").glob("*/*/report.md")
    means = overall_means(report.read_text(encoding="utf-8"))
    for metric in ("hit_at_1", "recall_at_5", "recall_at_2000c", "mrr"):
        # the first table's row: its first column is "all", the mean with all four digits
        row = next(line for line in out.stderr.splitlines() if line.split()[:1] == [metric])
        assert row.split()[1] == means[metric], row
    # every question type is shown, in a table of its own when they do not all fit
    for type_name in ("exception", "factual", "multi_doc", "procedural"):
        assert type_name in out.stderr
    intervals = re.findall(r"\[\d\.\d{3}, \d\.\d{3}\]", out.stderr)
    assert len(intervals) >= 5 * 15  # every mean with its whole interval
    # the run's plot says what it shows
    config_hash = re.search(r"config  ([0-9a-f]{12})", out.stderr)
    assert config_hash is not None
    svg = (report.parent / "metrics_at_k.svg").read_text(encoding="utf-8")
    assert f"hit@k and recall@k, split tuning, config {config_hash.group(1)}</text>" in svg
    assert "chunking fixed size=800 overlap=100, preprocess none</text>" in svg
    assert "k (retrieved chunks)</text>" in svg and "mean over 189 answerable cases" in svg


NARROW_SWEEP = """\
description: preprocessing only, for the 80-column test
baseline:
  embedding: bm25
  chunking: heading
  retrieval.top_k: 40
axes:
  - preprocess: [none, nfkc, nfkc_synonyms]
objective: recall_at_2000c
min_improvement: 0.01
decision: significant
"""


def test_the_sweep_table_and_decisions_fit_with_every_figure(project: Path) -> None:
    (project / "sweeps").mkdir()
    (project / "sweeps" / "narrow.yaml").write_text(NARROW_SWEEP, encoding="utf-8")
    out = run("ragsweep", "-m", "sweep=narrow", "tracking=off", cwd=project)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_fits(out.stdout + out.stderr)
    (result_file,) = (project / "outputs" / "multirun").glob("*/*/sweep_result.yaml")
    result = yaml.safe_load(result_file.read_text(encoding="utf-8"))
    (axis,) = result["axes"]
    for trial in axis["trials"]:
        (row,) = [
            line for line in out.stdout.splitlines() if line[3:].split()[:1] == [trial["value"]]
        ]
        assert f"{trial['objective']:.4f}" in row.split()
        paired = trial["vs_chosen"]
        if paired is None:
            continue
        low, high = paired["interval"]
        assert f"{paired['delta']:+.3f}" in row.split(), row
        assert f"[{low:+.3f}, {high:+.3f}]" in row, row
        assert p_text(paired["p_value"]) in row.split(), row
    assert f"final recall_at_2000c = {result['final']['objective']:.4f}" in out.stdout
    # the reproduce command pastes as one command: continued lines end with a backslash
    start = out.stdout.index("reproduce: ")
    command = out.stdout[start:].split("\n  launched", 1)[0]
    joined = command.replace(" \\\n", " ").split()
    assert joined[:2] == ["reproduce:", "ragsweep"]
    assert joined[2:] == result["final"]["overrides"]


@pytest.fixture(scope="module")
def two_runs() -> Iterator[tuple[Path, MlflowClient, list[str]]]:
    """A project with two demo runs logged by one grid (``preprocess=none``, then
    ``nfkc_synonyms``): its folder, a client on its store and the run ids in that order."""
    project = short_folder()
    out = run("ragsweep", "-m", "preprocess=none,nfkc_synonyms", cwd=project)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_fits(out.stdout + out.stderr)  # Hydra's job lines and MLflow's first-store note too
    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'outputs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("ragsweep")
    runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time"])
    yield project, client, [r.info.run_id for r in runs]
    shutil.rmtree(project, ignore_errors=True)


def test_compare_fits_and_prints_the_decision_figures(
    two_runs: tuple[Path, MlflowClient, list[str]],
) -> None:
    project, client, (baseline, candidate) = two_runs
    out = run("ragsweep-compare", baseline, candidate, "--no-log", cwd=project)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_fits(out.stdout + out.stderr)
    objective = "recall_at_5"  # the default config's eval.objective
    before = client.get_run(baseline).data.metrics[objective]
    after = client.get_run(candidate).data.metrics[objective]
    # the overall table's row (the by-type tables come after it)
    row = next(line for line in out.stdout.splitlines() if line.startswith(f"| {objective} |"))
    assert row == f"| {objective} | {before:.4f} | {after:.4f} | {after - before:+.4f} |"
    decision = " ".join(out.stdout.split("**Decision: ", 1)[1].split("**", 1)[0].split())
    assert f"{objective} {after - before:+.4f} [" in decision
    p_value = re.search(r"p = (\d\.\d{4})", decision)
    assert p_value is not None
    significance = " ".join(out.stdout.split("## Paired significance", 1)[1].split())
    assert f"p = {p_value.group(1)}" in significance
    for type_name in ("exception", "factual", "multi_doc", "procedural"):
        assert lines_with(out.stdout, "| metric |") and type_name in out.stdout
    assert "  - first chunk: baseline `" in out.stdout  # the flipped cases, explained
    assert "  - stage: **" in out.stdout and "  - next action: " in out.stdout


def test_promote_fits_and_prints_the_holdout_figures(
    two_runs: tuple[Path, MlflowClient, list[str]],
) -> None:
    project, client, (_, tuned) = two_runs
    out = run("ragsweep-promote", tuned, cwd=project)
    assert out.returncode == 0, out.stderr[-3000:]
    assert_fits(out.stdout + out.stderr)
    holdout = client.get_run(out.stdout.strip()).data.metrics
    tuning = client.get_run(tuned).data.metrics
    for metric in ("recall_at_5", "hit_at_2000c", "mrr"):
        gap = holdout[metric] - tuning[metric]
        row = f"| {metric} | {tuning[metric]:.4f} | {holdout[metric]:.4f} | {gap:+.4f} |"
        assert row in out.stderr


def test_golden_stats_fits_and_shows_each_detectable_difference(project: Path) -> None:
    out = run("ragsweep-golden", "stats", cwd=project)
    assert out.returncode == 0, out.stderr
    assert_fits(out.stdout + out.stderr)
    corpus = load_corpus(CorpusConfig(path=str(REPO / "demo" / "corpus")))
    golden = load_golden(GoldenConfig(path=str(REPO / "demo" / "golden.jsonl")), corpus)
    for stats in slice_stats(golden, PowerAssumptions()):
        shown = "none" if stats.detectable is None else f"{stats.detectable:.3f}"
        row = f"| {stats.split} | {stats.type} | {stats.answerable} | {stats.unanswerable} | "
        assert row + shown + " |" in out.stdout


def test_check_fits_with_its_summary_and_its_problems(project: Path) -> None:
    clean = run("ragsweep", "check", "sweep=chunking", cwd=project)
    assert clean.returncode == 0, clean.stderr
    assert_fits(clean.stdout + clean.stderr)
    assert "4 axes, 12 values; objective recall_at_2000c (maximize)," in clean.stdout
    bad = run("ragsweep", "check", "chunking=headng", "chunking.sise=3", cwd=project)
    assert bad.returncode == 2
    assert_fits(bad.stdout + bad.stderr)
    problems = [line for line in bad.stderr.splitlines() if re.match(r"  \S", line)]
    assert len(problems) == 2  # each problem starts a line; its continuation is indented


# -- the helpers -----------------------------------------------------------------------------


def test_wrap_never_breaks_inside_a_figure() -> None:
    text = (
        "chosen chunking.size=800 (recall_at_2000c=0.7857); runner-up 1200: Δ +0.000 "
        "[-0.016, +0.016], p = 1.000, not distinguishable at alpha 0.05 (saved ~0.5 s)"
    )
    for width in range(30, 90):
        lines = wrap(text, width, "  ", "    ")
        assert " ".join(" ".join(lines).split()) == text
        joined = "\n".join(lines)
        for figure in ("Δ +0.000", "[-0.016, +0.016]", "p = 1.000", "~0.5 s"):
            assert figure in joined, (width, joined)
        assert all(len(line) <= width for line in lines if " " in line.strip())


def test_column_groups_split_evenly_and_fit() -> None:
    assert column_groups(15, [14] * 4, 80, 2) == [range(0, 4)]
    assert column_groups(15, [14] * 5, 80, 2) == [range(0, 3), range(3, 5)]
    groups = column_groups(10, [30, 5, 5, 30, 5], 50, 2)
    assert [i for g in groups for i in g] == [0, 1, 2, 3, 4]
    assert all(10 + sum([30, 5, 5, 30, 5][i] + 2 for i in g) <= 50 for g in groups)
    assert column_groups(10, [100], 50, 2) == [range(0, 1)]  # too wide alone: still shown


def test_markdown_tables_split_wide_tables_and_keep_every_cell() -> None:
    header = ["metric", *(f"type_{i} (n={i})" for i in range(6))]
    rows = [["chunks_used_at_2000c", *(f"{i + 0.123456:+.4f}" for i in range(6))]]
    text = markdown_tables(header, rows)
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert text.count("| metric |") >= 2
    for cell in [*header[1:], *rows[0][1:]]:
        assert f"| {cell} |" in text
    assert markdown_tables(["a", "b"], [["1", "2"]]) == "| a | b |\n|---|---|\n| 1 | 2 |"


def test_fit_markdown_wraps_prose_and_keeps_tables_and_headings() -> None:
    long_item = "- **cases**: " + "word " * 30 + "p = 0.0001"
    table = "| " + " | ".join(["cell"] * 20) + " |"
    heading = "# " + "heading " * 12
    text = fit_markdown("\n".join([heading, long_item, table]))
    lines = text.splitlines()
    assert lines[0] == heading and table in lines
    item = [line for line in lines if line not in (heading, table)]
    assert item[0].startswith("- **cases**: ") and all(x.startswith("  ") for x in item[1:])
    assert all(len(line) <= WIDTH for line in item)
    assert "p = 0.0001" in text


def test_command_lines_paste_as_one_command() -> None:
    command = "reproduce: ragsweep " + " ".join(f"key{i}=value{i}" for i in range(20))
    lines = command_lines(command, 40, "  ")
    assert all(len(line) <= 40 for line in lines)
    assert all(line.endswith(" \\") for line in lines[:-1])
    assert " ".join(" ".join(lines).replace(" \\", "").split()) == command
    assert FIGURE.search("0.7857")
