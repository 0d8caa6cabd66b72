"""Measures as objects: one name, one meaning, one direction; parsing and formatting."""

from __future__ import annotations

import pytest

from ragsweep.core.errors import ConfigError
from ragsweep.eval import measures
from ragsweep.eval.measures import Measure


@pytest.mark.parametrize(
    ("name", "measure"),
    [
        ("recall_at_5", Measure("recall", k=5)),
        ("hit_at_10", Measure("hit", k=10)),
        ("ndcg_at_3", Measure("ndcg", k=3)),
        ("coverage_at_1", Measure("coverage", k=1)),
        ("mrr", Measure("mrr")),
        ("hit_at_2000c", Measure("hit", budget=2000)),
        ("chunks_used_at_1000c", Measure("chunks_used", budget=1000)),
    ],
)
def test_names_parse_and_format_round_trip(name: str, measure: Measure) -> None:
    assert measures.parse(name) == measure
    assert measure.name == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("recal_at_5", "did you mean 'recall_at_5'"),
        ("ndcg_at_2000c", "not at a budget"),
        ("mrr_at_5", "not at a rank cut-off"),
        ("chunks_used_at_5", "not at a rank cut-off"),
        ("recall_at_0", "is not a measure"),
        ("recall", "not at no parameter"),
    ],
)
def test_bad_names_say_what_exists(name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        measures.parse(name)


def test_direction_follows_the_family() -> None:
    recall = measures.parse("recall_at_5")
    assert recall.higher_is_better and recall.direction == "maximize"
    assert recall.gain(0.7, 0.5) == pytest.approx(0.2)
    with pytest.raises(ConfigError, match="not a quality to optimize"):
        _ = measures.parse("chars_used_at_1000c").direction


def test_require_computed_names_the_key_and_what_a_run_computes() -> None:
    assert measures.require_computed("hit_at_3", (1, 3)).k == 3
    with pytest.raises(ConfigError, match=r"eval.objective='recall_at_5' is not computed"):
        measures.require_computed("recall_at_5", (1, 3))
    with pytest.raises(ConfigError, match="--metric: 'nope' is not a measure"):
        measures.require_computed("nope", (1, 3), key="--metric")


def test_computed_lists_each_family_at_each_parameter_in_report_order() -> None:
    names = [m.name for m in measures.computed((1, 5), (1000,))]
    assert names[:3] == ["hit_at_1", "hit_at_5", "hit_at_1000c"]
    assert "mrr" in names and "ndcg_at_1000c" not in names
    assert len(names) == len(set(names))
