"""Ctrl-C while ``ragsweep`` is still importing its libraries (issue 32, item 4): one line,
exit status 130, no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ragsweep.cli.entry import INTERRUPTED_START

RAGSWEEP = Path(sys.executable).parent / "ragsweep"


def _importing_libraries(pid: int) -> bool:
    """Whether the process has mapped a compiled module of an installed package: it is then
    past Python's own start-up and inside ``ragsweep.cli.entry``'s import of the CLI
    (ragsweep itself is pure Python)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False
    return any("-packages/" in line and ".so" in line for line in maps.splitlines())


def test_ctrl_c_during_start_up_imports_prints_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGSWEEP_")}
    process = subprocess.Popen(
        [str(RAGSWEEP), f"paths.output_dir={tmp_path / 'out'}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _importing_libraries(process.pid) and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err[-2000:]
    assert err.strip() == INTERRUPTED_START  # one line, no traceback
    assert not (tmp_path / "out").exists()
