"""``ragsweep-golden`` in a project: it reads the corpus as the project configures it (its
extensions too), and refuses what it cannot or must not stamp."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsweep.cli.golden import main as golden_main
from ragsweep.config.app import data_dir
from ragsweep.data.golden_stamp import STAMPED
from tests.cli.test_project import project_with_defaults, write

CASE = {"id": "q", "question": "When?", "evidence": [{"doc": "a.rst", "quote": "nightly"}]}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose corpus reads ``.rst`` files only, as the current directory."""
    root = project_with_defaults(tmp_path)
    write(
        root / "conf/corpus/mine.yaml",
        "name: mine\npath: ${paths.root_dir}/docs\nextensions: [.rst]\n",
    )
    write(root / "docs/a.rst", "Backups run nightly.\n")
    write(root / "golden.jsonl", json.dumps(CASE) + "\n")
    monkeypatch.chdir(root)
    for name in ("RAGSWEEP_ROOT", "RAGSWEEP_CONF_DIR"):
        monkeypatch.delenv(name, raising=False)
    return root


def test_stamp_and_stats_read_the_corpus_with_the_projects_extensions(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden_main(["stats"])  # a case over a .rst document loads
    assert "error" not in capsys.readouterr().err
    golden_main(["stamp"])
    assert capsys.readouterr().out == f"{project / 'golden.jsonl'}: 1 {STAMPED}\n"
    golden_main(["stamp", "--corpus", str(project / "docs")])  # --corpus keeps them too
    assert "already stamped" in capsys.readouterr().out


def test_stamp_refuses_a_missing_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        golden_main(["stamp", "nosuch.jsonl"])
    assert exited.value.code == 2
    assert "nosuch.jsonl: no such golden file" in capsys.readouterr().err
    assert not (project / "nosuch.jsonl").exists()


def test_stamp_refuses_the_bundled_golden_set(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundled = data_dir() / "demo" / "golden.jsonl"
    before = bundled.read_bytes()
    with pytest.raises(SystemExit) as exited:
        golden_main(["stamp", str(bundled), "--corpus", str(data_dir() / "demo" / "corpus")])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "bundled data" in err and "pass the FILE to stamp" in err
    assert bundled.read_bytes() == before
