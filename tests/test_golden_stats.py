"""``ragsweep-golden stats`` as a user runs it (subprocesses), checked by hand."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_jsonl

GOLDEN_CLI = Path(sys.executable).parent / "ragsweep-golden"

# Standard normal quantiles from a table: z_0.975, z_0.95, z_0.8, z_0.9.
Z_975, Z_95, Z_80, Z_90 = 1.959964, 1.644854, 0.841621, 1.281552

TEXT = "# Refunds\n\nRefunds are issued within 14 days.\n\n## Export\n\nExport is a ZIP file.\n"


def stats(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GOLDEN_CLI), "stats", *args], capture_output=True, text=True, timeout=120
    )


def answerable(case_id: str, case_type: str, split: str | None) -> dict[str, Any]:
    case = {
        "id": case_id,
        "question": f"question {case_id}",
        "type": case_type,
        "evidence": [{"doc": "help.md", "quote": "Refunds are issued within 14 days."}],
    }
    return case if split is None else {**case, "split": split}


def unanswerable(case_id: str, split: str) -> dict[str, Any]:
    return {
        "id": case_id,
        "question": "Is there a pony?",
        "type": "negative",
        "answerable": False,
        "split": split,
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """16 tuning factual cases (one of them without a split), 4 holdout procedural ones,
    and 3 + 1 unanswerable; the corpus is beside the golden file, as in demo/."""
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "help.md").write_text(TEXT, encoding="utf-8")
    cases = [answerable(f"f{i}", "factual", "tuning") for i in range(15)]
    cases += [answerable("no-split", "factual", None)]
    cases += [answerable(f"p{i}", "procedural", "holdout") for i in range(4)]
    cases += [unanswerable(f"n{i}", "tuning") for i in range(3)] + [unanswerable("n9", "holdout")]
    write_jsonl(tmp_path / "golden.jsonl", cases)
    return tmp_path / "golden.jsonl"


def table(stdout: str) -> dict[tuple[str, str], tuple[int, int, str]]:
    """``(split, type) -> (answerable, unanswerable, MDE cell)`` from the Markdown table."""
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[2].isdigit():
            rows[(cells[0], cells[1])] = (int(cells[2]), int(cells[3]), cells[4])
    return rows


def test_counts_and_mde_match_a_hand_computation(project: Path) -> None:
    out = stats(str(project), "--holdout-fraction", "0")
    assert out.returncode == 0, out.stderr
    rows = table(out.stdout)
    mde_16 = (Z_975 + Z_80) / math.sqrt(16)  # 2.801585 / 4 = 0.700396
    mde_4 = (Z_975 + Z_80) / math.sqrt(4)
    mde_20 = (Z_975 + Z_80) / math.sqrt(20)
    assert rows == {
        ("tuning", "factual"): (16, 0, f"{mde_16:.3f}"),
        ("tuning", "negative"): (0, 3, "-"),
        ("tuning", "procedural"): (0, 0, "-"),
        ("tuning", "(all)"): (16, 3, f"{mde_16:.3f}"),
        ("holdout", "factual"): (0, 0, "-"),
        ("holdout", "negative"): (0, 1, "-"),
        ("holdout", "procedural"): (4, 0, f"{mde_4:.3f}"),
        ("holdout", "(all)"): (4, 1, f"{mde_4:.3f}"),
        ("(all)", "(all)"): (20, 4, f"{mde_20:.3f}"),
    }
    assert rows[("tuning", "factual")][2] == "0.700"
    assert "2.8016 * 1 / sqrt(n)" in out.stdout
    assert "alpha = 0.05" in out.stdout and "80% power" in out.stdout
    assert f"validated against corpus {project.parent / 'corpus'}" in out.stdout


def test_alpha_power_and_sigma_change_the_mde(project: Path) -> None:
    out = stats(str(project), "--alpha", "0.1", "--power", "0.9", "--sigma", "0.5")
    assert out.returncode == 0, out.stderr
    z_sum = Z_95 + Z_90  # 2.926406
    assert table(out.stdout)[("holdout", "procedural")][2] == f"{z_sum * 0.5 / 2:.3f}"  # 0.732
    assert f"{z_sum:.4f} * 0.5 / sqrt(n)" in out.stdout
    assert "alpha = 0.1" in out.stdout and "90% power" in out.stdout


def test_holdout_fraction_assigns_cases_without_a_split(project: Path) -> None:
    # The one case without a split sits below 0.999999 by its id hash: holdout.
    rows = table(stats(str(project), "--holdout-fraction", "0.999999").stdout)
    assert rows[("tuning", "factual")][0] == 15
    assert rows[("holdout", "factual")][0] == 1


def test_corpus_can_be_given_explicitly(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    moved = elsewhere / "golden.jsonl"
    moved.write_bytes(project.read_bytes())
    missing = stats(str(moved))
    assert missing.returncode == 2
    assert "no corpus given and none beside it" in missing.stderr
    assert "pass --corpus PATH" in missing.stderr
    given = stats(str(moved), "--corpus", str(project.parent / "corpus"))
    assert given.returncode == 0, given.stderr
    mde_20 = (Z_975 + Z_80) / math.sqrt(20)
    assert table(given.stdout)[("(all)", "(all)")] == (20, 4, f"{mde_20:.3f}")


def test_missing_file_reports_the_loader_message(tmp_path: Path) -> None:
    out = stats(str(tmp_path / "nope.jsonl"))
    assert out.returncode == 2
    assert (
        out.stderr.strip()
        == f"error: {tmp_path / 'nope.jsonl'}: golden set does not exist (golden.path)"
    )
    assert out.stdout == ""


def test_invalid_case_reports_file_line_and_case(project: Path) -> None:
    lines = project.read_text(encoding="utf-8").splitlines()
    lines[2] = json.dumps({"id": "bad", "question": "Why?", "evidense": []})
    project.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = stats(str(project))
    assert out.returncode == 2
    assert f"error: {project}:3: case 'bad': unknown field 'evidense'" in out.stderr
    assert "did you mean 'evidence'?" in out.stderr
    assert "Traceback" not in out.stderr


def test_evidence_is_checked_against_the_corpus(project: Path) -> None:
    write_jsonl(
        project,
        [
            {
                **answerable("x", "factual", "tuning"),
                "evidence": [{"doc": "help.md", "quote": "not in the text"}],
            }
        ],
    )
    out = stats(str(project))
    assert out.returncode == 2
    assert "case 'x': evidence[0] ('help.md'): quote 'not in the text' not found" in out.stderr


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--alpha", "1.5", "argument --alpha: alpha must be in (0, 1), got 1.5"),
        ("--power", "0", "argument --power: power must be in (0, 1), got 0"),
        ("--sigma", "-1", "argument --sigma: must be > 0, got -1"),
        ("--alpha", "nan", "argument --alpha: not a finite number: 'nan'"),
        ("--holdout-fraction", "1", "argument --holdout-fraction: must be in [0, 1), got 1"),
    ],
)
def test_bad_options_fail_before_reading_anything(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    out = stats(str(tmp_path / "nope.jsonl"), option, value)  # the file does not exist either
    assert out.returncode == 2
    assert message in out.stderr
    assert "does not exist" not in out.stderr
