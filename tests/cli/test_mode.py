"""A run composes its config once (:mod:`ragsweep.cli.mode`): Hydra's ``get_mode`` is
answered from the command line, and the run writes what it wrote with Hydra's own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra._internal.hydra import Hydra
from hydra.types import RunMode

from ragsweep.cli.mode import METHOD, mode_from_command_line, mode_of

COUNTED = """
import json, sys
from hydra._internal.config_loader_impl import ConfigLoaderImpl
import ragsweep.cli.main as cli
if sys.argv[1] == "hydra":
    import contextlib
    cli.mode_from_command_line = contextlib.nullcontext  # Hydra's own get_mode
composed = []
real = ConfigLoaderImpl.load_configuration
def counted(self, *args, **kwargs):
    composed.append(1)
    return real(self, *args, **kwargs)
ConfigLoaderImpl.load_configuration = counted
sys.argv = ["ragsweep", *json.loads(sys.argv[2])]
try:
    cli.main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(len(composed)), file=sys.stderr)
"""


def _run(tmp_path: Path, get_mode: str, args: list[str]) -> int:
    done = subprocess.run(
        [sys.executable, "-c", COUNTED, get_mode, json.dumps(args)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stderr.strip().splitlines()[-1])


def test_a_run_composes_once_and_writes_what_hydra_s_own_mode_writes(tmp_path: Path) -> None:
    outputs = {side: tmp_path / side for side in ("hydra", "ragsweep")}
    counts = {}
    for side, folder in outputs.items():
        folder.mkdir()
        run_dir = folder / "run"
        args = ["tracking=off", f"hydra.run.dir={run_dir}"]
        counts[side] = _run(folder, side, args)
    assert counts == {"hydra": 2, "ragsweep": 1}
    for name in ("config.yaml", "overrides.yaml"):
        ours = (outputs["ragsweep"] / "run" / ".hydra" / name).read_text()
        theirs = (outputs["hydra"] / "run" / ".hydra" / name).read_text()
        assert ours == theirs.replace(str(outputs["hydra"]), str(outputs["ragsweep"]))
    hydra_yaml = (outputs["ragsweep"] / "run" / ".hydra" / "hydra.yaml").read_text()
    assert "mode: RUN" in hydra_yaml and "- hydra.mode=RUN" in hydra_yaml


def test_a_multirun_is_still_a_multirun(tmp_path: Path) -> None:
    args = ["-m", "tracking=off", "chunking.size=400,800", f"hydra.sweep.dir={tmp_path / 'm'}"]
    assert _run(tmp_path, "ragsweep", args) == 3  # the sweep's config, then one per job
    assert sorted(p.name for p in (tmp_path / "m").iterdir() if p.is_dir()) == ["0", "1"]


@pytest.mark.parametrize(
    ("overrides", "mode"),
    [
        ([], None),
        (["chunking.size=400"], None),
        (["hydra.mode=MULTIRUN"], RunMode.MULTIRUN),
        (["hydra.mode=RUN", "hydra.mode=MULTIRUN"], RunMode.MULTIRUN),
        (["hydra.mode=SIDEWAYS"], None),  # Hydra's composition reports it
    ],
)
def test_the_mode_is_the_command_line_s(overrides: list[str], mode: RunMode | None) -> None:
    assert mode_of(overrides) == mode


def test_another_spelling_of_the_mode_is_left_to_hydra(tmp_path: Path) -> None:
    args = ["++hydra.mode=MULTIRUN", "tracking=off", f"hydra.sweep.dir={tmp_path / 'm'}"]
    assert _run(tmp_path, "ragsweep", args) == 3  # get_mode's, the sweep's, the one job's
    assert (tmp_path / "m" / "0").is_dir()


def test_a_hydra_without_get_mode_keeps_its_own() -> None:
    class Other:  # a Hydra without get_mode
        pass

    original = Hydra.__dict__[METHOD]
    with mode_from_command_line(Other):
        assert not hasattr(Other, METHOD)
    with mode_from_command_line():
        assert Hydra.__dict__[METHOD] is not original
    assert Hydra.__dict__[METHOD] is original
