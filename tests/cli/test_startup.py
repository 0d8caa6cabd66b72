"""Commands that only read start without MLflow and without the pipeline (issue 31): the
``ragsweep`` console script imports a job's modules only when Hydra starts one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra._internal.config_loader_impl import ConfigLoaderImpl

from ragsweep.cli.help import PRIVATE_METHOD, one_repository

HEAVY = ("mlflow", "sqlalchemy", "alembic", "optuna", "ragsweep.run.pipeline")

ORIGINAL = ConfigLoaderImpl.__dict__[PRIVATE_METHOD]

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


@pytest.mark.parametrize("args", [["--help"], ["check"], ["best"]], ids=["help", "check", "best"])
def test_reading_commands_import_neither_mlflow_nor_the_pipeline(
    args: list[str], tmp_path: Path
) -> None:
    status, out, modules = _imported(args, tmp_path)
    assert status in (0, None, 2), out  # best: 2, no sweep to read in tmp_path
    assert args == ["best"] or "chunking: fixed, heading" in out or "corpus" in out
    assert not [m for m in HEAVY if m in modules]


PLAIN_HELP = """
import contextlib, sys
import ragsweep.cli.main as cli
cli.one_repository = contextlib.nullcontext  # Hydra's own help, without the speed-up
sys.argv = ["ragsweep", "chunking=heading", "--help"]
cli.main()
"""


def test_the_faster_help_prints_exactly_hydra_s_help(tmp_path: Path) -> None:
    def printed(script: str, *args: str) -> str:
        command = [sys.executable, "-c", script, *args]
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    plain = printed(PLAIN_HELP)
    _, faster, _ = _imported(["chunking=heading", "--help"], tmp_path)
    assert "chunking: fixed, heading" in plain and faster == plain


def test_a_hydra_without_the_private_method_gets_its_own_help() -> None:
    class Loader:  # a config loader without _parse_overrides_and_create_caching_repo
        pass

    with one_repository(Loader):
        assert not hasattr(Loader, PRIVATE_METHOD)
    with one_repository():
        assert ConfigLoaderImpl.__dict__[PRIVATE_METHOD] is not ORIGINAL
    assert ConfigLoaderImpl.__dict__[PRIVATE_METHOD] is ORIGINAL
