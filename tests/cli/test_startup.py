"""Commands that only read start without MLflow and without the pipeline (issue 31): the
``ragsweep`` console script imports a job's modules only when Hydra starts one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("mlflow", "sqlalchemy", "alembic", "ragsweep.run.pipeline")

SCRIPT = """
import json, sys
from ragsweep.cli.main import main
sys.argv = ["ragsweep", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exc:
    status = exc.code
print(json.dumps({"status": status, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def _imported(args: list[str], cwd: Path) -> tuple[int, str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["status"], done.stdout, set(report["modules"])


@pytest.mark.parametrize("args", [["--help"], ["check"]], ids=["help", "check"])
def test_reading_commands_import_neither_mlflow_nor_the_pipeline(
    args: list[str], tmp_path: Path
) -> None:
    status, out, modules = _imported(args, tmp_path)
    assert status in (0, None), out
    assert "chunking: fixed, heading" in out or "corpus" in out
    assert not [m for m in HEAVY if m in modules]
