"""``ragsweep-golden stats``: counts per split and type, and the detectable difference."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragsweep.cli.golden import main
from ragsweep.eval.power import PowerAssumptions, detectable_difference, min_discordant
from ragsweep.eval.stats import paired_randomization_test


def test_min_discordant_is_where_the_sign_flip_test_can_first_reject() -> None:
    needed = min_discordant(0.05)
    assert needed == 6
    assert paired_randomization_test([1.0] * (needed - 1)).p_value >= 0.05
    assert paired_randomization_test([1.0] * needed).p_value < 0.05


def test_the_detectable_difference_is_detected_with_the_stated_power() -> None:
    # Simulate pairs of 0/1 outcomes on n cases: discordant with probability q, the
    # candidate winning a discordant case with probability (1 + mde / q) / 2, and count how
    # often ragsweep-compare's own test rejects.
    n, assumptions = 200, PowerAssumptions(alpha=0.05, power=0.8, discordance=0.2)
    mde = detectable_difference(n, assumptions)
    assert mde == pytest.approx(2.8016 * (0.2 / n) ** 0.5 + 1 / n, abs=1e-4)
    rng = np.random.default_rng(0)
    rejected = 0
    trials = 1000
    for _ in range(trials):
        discordant = rng.random(n) < assumptions.discordance
        wins = rng.random(n) < (1 + mde / assumptions.discordance) / 2
        differences = np.where(discordant, np.where(wins, 1.0, -1.0), 0.0)
        rejected += paired_randomization_test(differences.tolist(), 2000, 1).p_value < 0.05
    assert rejected / trials == pytest.approx(0.8, abs=0.025)


def test_no_difference_is_detectable_on_too_few_cases() -> None:
    assumptions = PowerAssumptions(discordance=0.2)
    assert detectable_difference(29, assumptions) is None  # 5.8 discordant cases expected
    assert detectable_difference(30, assumptions) is not None
    assert detectable_difference(0, assumptions) is None


@pytest.mark.parametrize("field", ["alpha", "power", "discordance"])
def test_assumptions_outside_zero_one_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match=f"{field}=1.5"):
        PowerAssumptions(**{field: 1.5})


def table_rows(output: str) -> dict[tuple[str, str], list[str]]:
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0] in ("tuning", "holdout"):
            rows[(cells[0], cells[1])] = cells[2:]
    return rows


def test_stats_count_cases_per_split_and_type(mini_project: Path, capsys) -> None:
    main(["stats", str(mini_project / "golden.jsonl"), "--corpus", str(mini_project / "corpus")])
    output = capsys.readouterr().out
    assert "5 (4 answerable, 1 unanswerable)" in output
    assert "disagreeing on 20% of cases" in output
    rows = table_rows(output)
    assert rows[("tuning", "all types")] == ["3", "1", "none"]
    assert rows[("tuning", "factual")] == ["2", "0", "none"]
    assert rows[("tuning", "negative")] == ["0", "1", "none"]
    assert rows[("holdout", "all types")] == ["1", "0", "none"]


def test_permission_cases_are_not_counted_as_answerable(capsys) -> None:
    access = Path(__file__).resolve().parents[2] / "demo" / "access"  # the access demo
    main(["stats", str(access / "golden.jsonl"), "--corpus", str(access / "corpus.jsonl")])
    output = capsys.readouterr().out
    assert "10 (6 answerable, 4 unanswerable)" in output  # 4 permission cases
    assert table_rows(output)[("tuning", "permission")] == ["0", "2", "none"]


def test_stats_of_a_larger_set_give_a_difference(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("alpha beta gamma\n", encoding="utf-8")
    lines = [
        f'{{"id": "q{i}", "question": "q?", "type": "t{i % 2}", "split": "tuning", '
        '"evidence": [{"doc": "a.md", "quote": "beta"}]}'
        for i in range(400)
    ]
    (tmp_path / "golden.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "ragsweep-golden"),
            "stats",
            str(tmp_path / "golden.jsonl"),
            "--corpus",
            str(corpus),
            "--discordance",
            "0.1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    expected = detectable_difference(400, PowerAssumptions(discordance=0.1))
    assert table_rows(out.stdout)[("tuning", "all types")] == ["400", "0", f"{expected:.3f}"]
    assert table_rows(out.stdout)[("tuning", "t0")][:2] == ["200", "0"]


def test_bad_input_exits_2_naming_it(mini_project: Path, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["stats", str(mini_project / "nope.jsonl"), "--corpus", str(mini_project / "corpus")])
    assert info.value.code == 2
    assert "nope.jsonl: golden set does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["stats", str(mini_project / "golden.jsonl"), "--power", "1"])
    assert info.value.code == 2
    assert "--power=1.0 must be in (0, 1)" in capsys.readouterr().err
