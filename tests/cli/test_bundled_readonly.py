"""Outside a project the defaults are the bundled demo data: the commands that write a
golden file refuse it (a named error, exit 2, before any work) instead of editing the
installed package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragsweep.config.app import data_dir
from ragsweep.core.errors import ConfigError
from ragsweep.data.golden_file import read_golden_file, save_case

BIN = Path(sys.executable).parent
DEMO_GOLDEN = data_dir() / "demo" / "golden.jsonl"
COMMANDS = {
    "label": [str(BIN / "ragsweep"), "label", "--port", "0"],
    # a base URL nobody listens on: the refusal must come before any call
    "draft": [
        str(BIN / "ragsweep-golden"),
        "draft",
        "--n",
        "1",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ],
}


def _outside_project() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGSWEEP_")}
    return {**env, "PYTHONUNBUFFERED": "1"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_refused_outside_a_project(tmp_path: Path, command: str) -> None:
    before = DEMO_GOLDEN.read_bytes()
    done = subprocess.run(
        COMMANDS[command],
        cwd=tmp_path,
        env=_outside_project(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "bundled data" in done.stderr and "ragsweep init" in done.stderr
    assert "Label app" not in done.stdout
    assert DEMO_GOLDEN.read_bytes() == before
    assert list(tmp_path.iterdir()) == []


def test_golden_file_writes_refuse_bundled_files() -> None:
    before = DEMO_GOLDEN.read_bytes()
    current = read_golden_file(DEMO_GOLDEN)
    with pytest.raises(ConfigError, match="bundled data"):
        save_case(DEMO_GOLDEN, current.digest, {"id": "x-new", "question": "q?"}, None)
    assert DEMO_GOLDEN.read_bytes() == before
