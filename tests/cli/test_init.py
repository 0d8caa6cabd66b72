"""``ragsweep init``: a starter project that checks and runs at once, never overwriting."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ragsweep.cli.init import EXAMPLE_DOCS, EXAMPLE_RETRIEVER_FILE, golden_template
from tests.cli.test_project import ragsweep, run_reports, write

STARTER = [
    "README.md",
    "conf/corpus/project.yaml",
    "conf/golden/project.yaml",
    "conf/project/default.yaml",
    "docs/example.md",
    "docs/faq.md",
    "golden.jsonl",
    "sweeps/project.yaml",
]


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_the_template_shows_each_evidence_form() -> None:
    evidence = [item for case in golden_template() for item in case.get("evidence", [])]
    assert any("quote" in e and "occurrence" not in e for e in evidence)
    assert any("occurrence" in e for e in evidence)
    assert any("start" in e and "end" in e for e in evidence)
    assert any(len(case.get("evidence", [])) > 1 for case in golden_template())
    assert any("scope" in case for case in golden_template())
    assert any(case.get("answerable") is False for case in golden_template())
    assert {e["doc"] for e in evidence} == set(EXAMPLE_DOCS)


def test_init_writes_a_project_that_checks_and_runs(tmp_path: Path) -> None:
    out = ragsweep("init", "proj", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    project = tmp_path / "proj"
    assert files_under(project) == STARTER
    corpus = yaml.safe_load((project / "conf/corpus/project.yaml").read_text(encoding="utf-8"))
    assert corpus["path"] == "${paths.root_dir}/docs"
    assert "next: cd " + str(project) in out.stdout
    assert "corpus=" not in out.stdout and "golden=" not in out.stdout
    assert "corpus=" not in (project / "README.md").read_text(encoding="utf-8")
    checked = ragsweep("check", cwd=project, MLFLOW_TRACKING_URI="", COLUMNS="300")
    assert checked.returncode == 0, checked.stderr
    size = sum(map(len, EXAMPLE_DOCS.values()))
    assert f"corpus    2 documents, {size} characters  {project / 'docs'}" in checked.stdout
    assert f"golden    6 cases  {project / 'golden.jsonl'}" in checked.stdout
    run = ragsweep("tracking=off", cwd=project, COLUMNS="300")  # no corpus=/golden=
    assert run.returncode == 0, run.stderr
    assert f"corpus  {project / 'docs'}" in run.stderr  # the run summary names both
    assert f"golden  {project / 'golden.jsonl'}" in run.stderr
    (report,) = run_reports(project / "outputs" / "runs")
    assert f"- **corpus**: {project / 'docs'}" in report
    assert "| recall_at_5 | 1.0000 |" in report


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    write(tmp_path / "README.md", "mine\n")
    write(tmp_path / "sweeps" / "project.yaml", "mine\n")
    out = ragsweep("init", cwd=tmp_path)
    assert out.returncode == 2
    assert "these files exist already, nothing was written" in out.stderr
    assert str(tmp_path / "README.md") in out.stderr
    assert str(tmp_path / "sweeps" / "project.yaml") in out.stderr
    assert files_under(tmp_path) == ["README.md", "sweeps/project.yaml"]
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == "mine\n"


def test_init_points_at_an_existing_corpus_and_golden_set(tmp_path: Path) -> None:
    handbook = write(tmp_path / "data" / "handbook" / "a.md", "# A\n\nText.\n").parent
    golden = write(tmp_path / "data" / "golden.jsonl", json.dumps({"id": "x"}) + "\n")
    out = ragsweep(
        "init", "proj", "--name", "hb", "--corpus", str(handbook), "--golden", "data/golden.jsonl",
        cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    project = tmp_path / "proj"
    assert files_under(project) == [
        "README.md",
        "conf/corpus/hb.yaml",
        "conf/golden/hb.yaml",
        "conf/project/default.yaml",
        "golden.template.jsonl",
        "sweeps/hb.yaml",
    ]
    corpus = yaml.safe_load((project / "conf/corpus/hb.yaml").read_text(encoding="utf-8"))
    assert corpus["path"] == str(handbook)
    golden_cfg = yaml.safe_load((project / "conf/golden/hb.yaml").read_text(encoding="utf-8"))
    assert golden_cfg["path"] == str(golden)
    assert golden.read_text(encoding="utf-8") == json.dumps({"id": "x"}) + "\n"


def test_init_refuses_a_name_ragsweep_ships(tmp_path: Path) -> None:
    out = ragsweep("init", "--name", "demo", cwd=tmp_path)
    assert out.returncode == 2
    assert "ragsweep ships a corpus and a golden option of that name" in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_example_retriever_runs_with_the_command_init_prints(tmp_path: Path) -> None:
    out = ragsweep("init", "--example", "retriever", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert f"wrote {tmp_path / EXAMPLE_RETRIEVER_FILE}" in out.stdout
    (command,) = [line.split() for line in out.stdout.splitlines() if "_target_=" in line]
    assert command[:2] == ["ragsweep", "embedding=custom"]
    run = ragsweep(*command[1:], "tracking=off", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    (report,) = run_reports(tmp_path / "outputs" / "runs")
    assert "- **model**: custom:retrievers.example.TfidfRetriever v1" in report
    assert f"- **golden**: {tmp_path / 'golden.jsonl'}" in report
    assert "| hit_at_5 | 1.0000 |" in report  # it finds the example answers


def test_the_example_retriever_is_added_to_an_existing_project(tmp_path: Path) -> None:
    assert ragsweep("init", cwd=tmp_path).returncode == 0
    before = files_under(tmp_path)
    out = ragsweep("init", "--example", "retriever", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert files_under(tmp_path) == sorted([*before, EXAMPLE_RETRIEVER_FILE.as_posix()])
    assert out.stdout.splitlines()[0] == f"wrote {tmp_path / EXAMPLE_RETRIEVER_FILE}"
    again = ragsweep("init", "--example", "retriever", cwd=tmp_path)
    assert again.returncode == 2
    assert str(tmp_path / EXAMPLE_RETRIEVER_FILE) in again.stderr
