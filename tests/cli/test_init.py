"""``ragsweep init``: a starter project that checks and runs at once, never overwriting."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ragsweep.cli.init import EXAMPLE_DOCS, golden_template
from tests.cli.test_project import ragsweep, write

STARTER = [
    "README.md",
    "conf/corpus/project.yaml",
    "conf/golden/project.yaml",
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
    checked = ragsweep(
        "check", "corpus=project", "golden=project", "sweep=project", cwd=project,
        MLFLOW_TRACKING_URI="",
    )  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert f"corpus    2 documents, {sum(map(len, EXAMPLE_DOCS.values()))} characters" in (
        checked.stdout
    )
    assert "golden    6 cases" in checked.stdout
    run = ragsweep("corpus=project", "golden=project", "tracking=off", cwd=project)
    assert run.returncode == 0, run.stderr
    (report,) = (project / "outputs" / "runs").glob("*/*/report.md")
    assert "recall_at_5" in report.read_text(encoding="utf-8")


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
