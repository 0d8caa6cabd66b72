"""The gate: thresholds file, ratchet, checks, and the pytest quality gate itself."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from ragsweep.cli.release import gate_main
from ragsweep.core.errors import ConfigError
from ragsweep.release.errors import RunLookupError, ThresholdsError
from ragsweep.release.gate import (
    check_access,
    check_decline,
    check_floors,
    check_latency,
    pinned_run,
)
from ragsweep.release.promote import promote
from ragsweep.release.store import RunStore
from ragsweep.release.thresholds import (
    Thresholds,
    default_path,
    header_comment,
    load_thresholds,
    ratchet,
    render_thresholds,
    save_thresholds,
    slackened,
)
from tests.release_support import add_holdout_cases, evaluate, store_uri

REPO = Path(__file__).resolve().parents[2]
HEADER = "# Team gate.\n# Keep this comment."

pytest_plugins = ["pytester"]


def test_floor_violation_message() -> None:
    (violation,) = check_floors({"recall_at_5": 0.742}, {"recall_at_5": 0.8})
    assert violation.message == "recall_at_5 dropped to 0.742 (floor 0.80)"
    assert check_floors({"recall_at_5": 0.8}, {"recall_at_5": 0.8}) == []
    (close,) = check_floors({"mrr": 0.79996}, {"mrr": 0.8})
    assert close.message == "mrr dropped to 0.79996 (floor 0.80)"
    (missing,) = check_floors({}, {"by_type/x/mrr": 0.749})
    assert missing.message == "by_type/x/mrr is missing from the evaluation (floor 0.749)"


def test_latency_and_decline_checks() -> None:
    assert check_latency({"latency_ms_p95": 12.5}, None) == []
    assert check_latency({"latency_ms_p95": 12.5}, 20.0) == []
    (slow,) = check_latency({"latency_ms_p95": 25.0}, 20.0)
    assert slow.message == "latency_ms_p95 rose to 25.000 ms (max 20.00 ms)"
    baseline = {"recall_at_5": 0.9, "mrr": 0.7}
    current = {"recall_at_5": 0.84, "mrr": 0.66}
    (fell,) = check_decline(current, baseline, ["recall_at_5", "mrr"], 0.05, "run b")
    assert fell.metric == "recall_at_5"
    assert fell.message == "recall_at_5 fell 0.060 below run b (0.900 → 0.840; max decline 0.05)"


def test_ratchet_raises_and_never_lowers() -> None:
    start = Thresholds(floors={"recall_at_5": 0.6, "mrr": 0.9})
    raised, changes = ratchet(start, {"recall_at_5": 0.8, "mrr": 0.7, "hit_at_5": 1.0}, 0.05)
    assert raised.floors == {"recall_at_5": 0.75, "mrr": 0.9}
    assert [(c.metric, c.action) for c in changes] == [("recall_at_5", "raised"), ("mrr", "kept")]

    lower_run = {"recall_at_5": 0.5, "mrr": 0.5}
    kept, _ = ratchet(raised, lower_run, 0.05)
    assert kept.floors == raised.floors
    lowered, changes = ratchet(raised, lower_run, 0.05, allow_lower=True)
    assert lowered.floors == {"recall_at_5": 0.45, "mrr": 0.45}
    assert {c.action for c in changes} == {"lowered"}

    added, changes = ratchet(
        start, {"recall_at_5": 0.6, "mrr": 0.9, "hit_at_5": 1.0}, 0.1, add=["hit_at_5"]
    )
    assert added.floors["hit_at_5"] == 0.9 and changes[-1].action == "added"
    with pytest.raises(ThresholdsError, match="the run has no metric 'ndcg_at_3'"):
        ratchet(start, {"recall_at_5": 0.6, "mrr": 0.9}, 0.1, add=["ndcg_at_3"])
    assert slackened(0.8, 0.05) == 0.75 and slackened(0.7429, 0.0) == 0.742
    assert slackened(0.01, 0.05) == 0.0


def test_thresholds_file_round_trip_keeps_the_header(tmp_path: Path) -> None:
    assert load_thresholds(default_path()).floors  # the repository's file is valid
    path = tmp_path / "thresholds.yaml"
    path.write_text(HEADER + "\n\nfloors:\n  recall_at_5: 0.5\n", encoding="utf-8")
    thresholds = Thresholds(
        floors={"by_type/factual/mrr": 0.25, "recall_at_5": 0.5},
        max_latency_ms_p95=40.0,
        max_decline=0.05,
    )
    save_thresholds(path, thresholds)
    text = path.read_text(encoding="utf-8")
    assert text.startswith(HEADER + "\n\n# Minimum value per metric")
    assert load_thresholds(path) == thresholds
    assert render_thresholds(load_thresholds(path), HEADER) == text


def test_a_floor_can_name_a_by_origin_figure(tmp_path: Path) -> None:
    # runs log by_origin/<origin>/<measure> (docs/tracking.md): a floor may name one
    path = tmp_path / "thresholds.yaml"
    floors = {"by_type/factual/mrr": 0.2, "by_origin/hand/mrr": 0.3, "mrr": 0.4}
    save_thresholds(path, Thresholds(floors=floors))
    assert list(load_thresholds(path).floors) == [
        "mrr",
        "by_origin/hand/mrr",
        "by_type/factual/mrr",
    ]
    figures = {"by_origin/hand/mrr": 0.5, "by_origin/drafted/mrr": 0.9, "mrr": 0.6}
    raised, _ = ratchet(Thresholds(), figures, 0.1, add=["by_origin/drafted/mrr"])
    assert raised.floors == {"by_origin/drafted/mrr": 0.8}
    (low,) = check_floors(figures, {"by_origin/hand/mrr": 0.55})
    assert low.message == "by_origin/hand/mrr dropped to 0.500 (floor 0.55)"
    with pytest.raises(ConfigError, match="not a retrieval metric"):
        Thresholds(floors={"by_origin/hand/x/mrr": 0.1})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("floors:\n  recall_at_50x: 0.5\n", "thresholds.floors.recall_at_50x is not a retrieval"),
        ("floors:\n  mrr: 1.5\n", r"thresholds.floors.mrr=1.5 must be in \[0, 1\]"),
        ("floors: {}\nmax_decline: -1\n", "thresholds.max_decline=-1.0 must be >= 0"),
        ("floor: {}\n", "thresholds.floor is not a known key"),
    ],
)
def test_invalid_thresholds_name_the_file_and_key(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(ThresholdsError, match=rf"bad\.yaml: {message}"):
        load_thresholds(path)


@pytest.fixture
def promoted(compose_config, mini_project: Path, tracking_db: Path) -> tuple[RunStore, str, str]:
    """A tuning run and its promotion, logged with the real pipeline: (store, tuning, holdout)."""
    project = add_holdout_cases(mini_project)
    tuning = evaluate(compose_config, project, "tuning")
    store = RunStore(store_uri(project))
    console = Console(file=io.StringIO())
    promotion = promote(store, str(tuning.run_id), project / "promoted", console=console)
    return store, str(tuning.run_id), str(promotion.holdout.run_id)


def test_ratchet_cli_writes_floors_from_a_holdout_run(
    promoted: tuple[RunStore, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, tuning_id, holdout_id = promoted
    path = tmp_path / "thresholds.yaml"
    save_thresholds(path, Thresholds(floors={"recall_at_5": 0.0}))
    common = ["--thresholds", str(path), "--tracking-uri", store.uri]
    values = store.get(holdout_id).metrics

    with pytest.raises(SystemExit) as exit_info:
        gate_main(["ratchet", holdout_id, "--slack", "0.05", "--metric", "hit_at_5", *common])
    assert exit_info.value.code == 0
    floors = load_thresholds(path).floors
    assert floors == {
        "recall_at_5": slackened(values["recall_at_5"], 0.05),
        "hit_at_5": slackened(values["hit_at_5"], 0.05),
    }

    with pytest.raises(SystemExit):
        gate_main(["ratchet", holdout_id, "--slack", "0.3", *common])
    assert load_thresholds(path).floors == floors  # a larger slack never lowers
    capsys.readouterr()

    with pytest.raises(SystemExit) as exit_info:
        gate_main(["ratchet", tuning_id, *common])
    assert exit_info.value.code == 2
    assert "ratchet from a promoted (holdout) run" in capsys.readouterr().err


def test_ratchet_writes_the_projects_thresholds_never_the_packaged_ones(
    promoted: tuple[RunStore, str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, _, holdout_id = promoted
    project = tmp_path / "user-project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.delenv("RAGSWEEP_ROOT", raising=False)
    monkeypatch.delenv("RAGSWEEP_GATE_THRESHOLDS", raising=False)
    packaged = REPO / "conf" / "gate" / "thresholds.yaml"
    shipped = packaged.read_bytes()
    assert default_path() == packaged  # the project has no thresholds of its own yet

    with pytest.raises(SystemExit) as exit_info:
        gate_main(["ratchet", holdout_id, "--tracking-uri", store.uri])
    assert exit_info.value.code == 0
    own = project / "conf" / "gate" / "thresholds.yaml"
    assert f"wrote {own}" in capsys.readouterr().out
    assert packaged.read_bytes() == shipped
    assert default_path() == own
    assert own.read_text(encoding="utf-8").startswith(header_comment(shipped.decode("utf-8")))
    assert load_thresholds(own).floors.keys() == load_thresholds(packaged).floors.keys()


def run_quality_gate(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, uri: str, thresholds: Path
) -> pytest.RunResult:
    """Run the real ``tests/quality`` gate (in process) against ``uri`` and ``thresholds``."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("RAGSWEEP_GATE_THRESHOLDS", str(thresholds))
    monkeypatch.delenv("RAGSWEEP_GATE_RUN", raising=False)
    return pytester.runpytest_inprocess(
        "-m", "quality", "-rs", "-p", "no:cacheprovider", str(REPO / "tests" / "quality")
    )


def test_quality_gate_fails_on_a_floor_above_the_current_value(
    promoted: tuple[RunStore, str, str],
    tmp_path: Path,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, _, holdout_id = promoted
    mrr = store.get(holdout_id).metrics["mrr"]
    assert 0.0 < mrr < 1.0  # the holdout has a hit and a miss
    path = tmp_path / "thresholds.yaml"
    limits = Thresholds(
        floors={"mrr": 1.0, "hit_at_10": 0.0}, max_latency_ms_p95=60_000.0, max_decline=0.05
    )
    save_thresholds(path, limits)

    result = run_quality_gate(pytester, monkeypatch, store.uri, path)

    result.assert_outcomes(failed=1, passed=4)  # hit_at_10, latency, decline, no leak pass
    result.stdout.fnmatch_lines([f"*mrr dropped to {mrr:.3f} (floor 1.00)*"])


def test_quality_gate_skips_when_nothing_is_promoted(
    tmp_path: Path,
    tracking_db: Path,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "thresholds.yaml"
    save_thresholds(path, Thresholds(floors={"mrr": 1.0}))
    result = run_quality_gate(pytester, monkeypatch, f"sqlite:///{tracking_db}", path)
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(
        ["*nothing promoted yet: no complete run tagged ragsweep.promoted_from*"]
    )


def test_any_access_leak_fails_whatever_the_averages() -> None:
    assert check_access({"recall_at_5": 0.9}) == []  # a corpus without access metadata
    assert check_access({"acl_leaks": 0.0, "revoked_retrieved": 0.0}) == []
    (violation,) = check_access({"acl_leaks": 3.0, "cases_with_acl_leaks": 2.0})
    assert violation.kind == "leak" and violation.message == (
        "acl_leaks: 3 retrieved chunk(s) in 2 case(s) came from documents the case's principal "
        "may not read (any leak fails the gate)"
    )


def test_an_empty_gate_run_variable_is_refused_not_taken_as_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``RAGSWEEP_GATE_RUN="$RUN"`` with an empty ``RUN`` must not gate the newest promoted
    run: exit 2 naming the variable, before the store is opened (it is not created)."""
    monkeypatch.setenv("RAGSWEEP_GATE_RUN", "")
    db = tmp_path / "mlflow.db"
    with pytest.raises(SystemExit) as exit_info:
        gate_main(["check", "--tracking-uri", f"sqlite:///{db}"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: $RAGSWEEP_GATE_RUN is set but empty") and "unset" in err
    assert not db.exists()
    monkeypatch.setenv("RAGSWEEP_GATE_RUN", "  ")
    with pytest.raises(RunLookupError, match="set but empty"):
        pinned_run()
    monkeypatch.delenv("RAGSWEEP_GATE_RUN")
    assert pinned_run() is None
