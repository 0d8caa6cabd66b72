"""Measures as objects: one name, one written meaning, one direction (see docs/metrics.md).

A :class:`Measure` is a family (``recall``, ``hit``, ...) with an optional rank cut-off
``k`` or context budget in characters. Its name is the key it has everywhere, in per-case
metrics, MLflow, reports and config values: ``recall_at_5`` (cut-off 5), ``hit_at_2000c``
(budget of 2,000 characters), ``mrr`` (no parameter). :func:`parse` is the only place a
name is read, and :attr:`Measure.name` the only place one is written.

Families are held in a registry, so a name from a config (``eval.objective``, a sweep
file's ``objective``, ``ragsweep-compare --metric``, a gate floor) is checked against what
exists and what a run computes, with a suggestion for a near miss.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragsweep.core.errors import ConfigError
from ragsweep.core.registry import Registry

RANK = "rank"
BUDGET = "budget"
NONE = "none"

# Family names, for the modules that compute or read a family (metrics, reports, compare).
HIT = "hit"
RECALL = "recall"
NDCG = "ndcg"
COVERAGE = "coverage"
MRR = "mrr"
CHUNKS_USED = "chunks_used"
CHARS_USED = "chars_used"
RAN_OUT = "ran_out"


@dataclass(frozen=True)
class Family:
    """A kind of measure. ``parameter`` says what it is computed at: a rank cut-off
    (``rank``), a context budget in characters (``budget``), or nothing (``none``);
    ``higher_is_better`` is None for descriptive figures that are not a quality (e.g. how
    many chunks a budget packed), which cannot be an objective."""

    name: str
    parameters: tuple[str, ...]
    higher_is_better: bool | None
    definition: str


FAMILIES: Registry[Family] = Registry("measure family")
_ORDER: list[str] = []  # registration order = report order


def _family(
    name: str, parameters: tuple[str, ...], higher_is_better: bool | None, definition: str
) -> None:
    FAMILIES.add(name, Family(name, parameters, higher_is_better, definition))
    _ORDER.append(name)


_family(
    HIT,
    (RANK, BUDGET),
    True,
    "1 if at least one retrieved chunk (of the top k, or packed into the budget) hits an "
    "evidence span, else 0 (Success@k); averaged, the fraction of cases with any evidence "
    "retrieved.",
)
_family(
    RECALL,
    (RANK, BUDGET),
    True,
    "Fraction of the case's evidence spans hit by at least one retrieved chunk (of the top "
    "k, or packed into the budget) (TREC recall@k).",
)
_family(
    NDCG,
    (RANK,),
    True,
    "Binary nDCG@k: a rank gains 1 if its chunk hits an evidence span not hit above it, "
    "discounted by log2(rank + 1) and normalised by the ideal ranking of min(n_spans, k) hits.",
)
_family(
    COVERAGE,
    (RANK, BUDGET),
    True,
    "Fraction of the evidence characters (union of the spans per document) that lie inside "
    "the union of the retrieved chunks (the top k, or those packed into the budget).",
)
_family(
    MRR,
    (NONE,),
    True,
    "Reciprocal rank of the first retrieved chunk that hits any evidence span (0 if none "
    "does), averaged over cases.",
)
_family(
    CHUNKS_USED,
    (BUDGET,),
    None,
    "Number of chunks packed into the context budget (descriptive, not a quality).",
)
_family(
    CHARS_USED,
    (BUDGET,),
    None,
    "Characters of chunk text packed into the context budget, overlap counted once "
    "(descriptive, not a quality).",
)
_family(
    RAN_OUT,
    (BUDGET,),
    None,
    "1 if the ranking ended before the budget was filled (every retrieved chunk was packed "
    "and none was refused), else 0; averaged, the share of cases whose context may hold less "
    "than a deeper ranking would have given it (descriptive, not a quality).",
)

_NAME = re.compile(r"^(?P<family>[a-z][a-z0-9_]*?)_at_(?P<value>[1-9][0-9]*)(?P<unit>c?)$")


@dataclass(frozen=True, order=True)
class Measure:
    """A family at a cut-off ``k`` (ranks) or a ``budget`` (characters), or neither."""

    family: str
    k: int | None = None
    budget: int | None = None

    def __post_init__(self) -> None:
        family = FAMILIES.get(self.family)
        parameter = BUDGET if self.budget is not None else RANK if self.k is not None else NONE
        if self.k is not None and self.budget is not None:
            raise ValueError("a measure has a cut-off or a budget, not both")
        if parameter not in family.parameters:
            raise ConfigError(
                f"measure {self.family!r} is computed at {_describe(family.parameters)}, "
                f"not at {_describe((parameter,))}"
            )
        if (self.k is not None and self.k < 1) or (self.budget is not None and self.budget < 1):
            raise ConfigError(f"measure {self.family}: cut-offs and budgets are >= 1")

    @property
    def name(self) -> str:
        """The key of this measure everywhere: ``recall_at_5``, ``hit_at_2000c``, ``mrr``."""
        if self.k is not None:
            return f"{self.family}_at_{self.k}"
        if self.budget is not None:
            return f"{self.family}_at_{self.budget}c"
        return self.family

    @property
    def higher_is_better(self) -> bool | None:
        return FAMILIES.get(self.family).higher_is_better

    @property
    def definition(self) -> str:
        return FAMILIES.get(self.family).definition

    @property
    def direction(self) -> str:
        """``maximize`` or ``minimize``: the only direction a search over it can have."""
        if self.higher_is_better is None:
            raise ConfigError(f"{self.name} describes a run; it is not a quality to optimize")
        return "maximize" if self.higher_is_better else "minimize"

    def gain(self, candidate: float, reference: float) -> float:
        """How much better ``candidate`` is than ``reference`` (> 0: better)."""
        return candidate - reference if self.direction == "maximize" else reference - candidate

    def __str__(self) -> str:
        return self.name


def _describe(parameters: Iterable[str]) -> str:
    words = {RANK: "a rank cut-off (_at_K)", BUDGET: "a budget (_at_Bc)", NONE: "no parameter"}
    return " or ".join(words[p] for p in parameters)


def parse(name: str) -> Measure:
    """The measure named ``name``; a ConfigError with the families (and a near match)
    for anything else."""
    if not isinstance(name, str):
        raise ConfigError(f"a measure name is a string like 'recall_at_5', got {name!r}")
    match = _NAME.match(name)
    if match is None:
        if name in FAMILIES:
            return Measure(name)
        raise ConfigError(_unknown(name))
    family, value, unit = match["family"], int(match["value"]), match["unit"]
    if family not in FAMILIES:
        raise ConfigError(_unknown(name))
    return Measure(family, budget=value) if unit else Measure(family, k=value)


def _unknown(name: str) -> str:
    examples = "recall_at_5, hit_at_10, ndcg_at_10, coverage_at_5, mrr, recall_at_2000c"
    families = ", ".join(FAMILIES.names())
    close = difflib.get_close_matches(name, [*_example_names(), *FAMILIES.names()], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{name!r} is not a measure (families: {families}; e.g. {examples}){hint}"


def _example_names() -> list[str]:
    return [m.name for m in computed((1, 3, 5, 10), (1000, 2000, 4000))]


def computed(ks: Sequence[int], budgets: Sequence[int] = ()) -> list[Measure]:
    """Every measure a run with cut-offs ``ks`` and budgets (characters) computes, in report
    order: per family, each k then each budget."""
    out: list[Measure] = []
    for family in _ORDER:
        parameters = FAMILIES.get(family).parameters
        if RANK in parameters:
            out += [Measure(family, k=k) for k in ks]
        if BUDGET in parameters:
            out += [Measure(family, budget=b) for b in budgets]
        if NONE in parameters:
            out.append(Measure(family))
    return out


def require_computed(
    name: str, ks: Sequence[int], budgets: Sequence[int] = (), key: str = "eval.objective"
) -> Measure:
    """:func:`parse` ``name`` and check a run with ``ks`` and ``budgets`` computes it; the
    error names ``key`` and lists what is computed."""
    try:
        measure = parse(name)
    except ConfigError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    names = [m.name for m in computed(ks, budgets)]
    if measure.name not in names:
        raise ConfigError(
            f"{key}={name!r} is not computed with eval.ks={list(ks)}, "
            f"eval.budgets={list(budgets)}; choose one of: {', '.join(names)}"
        )
    return measure


def require_objective(
    name: str, ks: Sequence[int], budgets: Sequence[int] = (), key: str = "eval.objective"
) -> Measure:
    """:func:`require_computed`, and the measure must be a quality with a direction, not a
    descriptive figure such as ``chunks_used_at_1000c``."""
    measure = require_computed(name, ks, budgets, key)
    if measure.higher_is_better is None:
        qualities = [f for f in _ORDER if FAMILIES.get(f).higher_is_better is not None]
        raise ConfigError(
            f"{key}={name!r} describes a run, it is not a quality to optimize; choose a "
            f"measure of the families {', '.join(qualities)}"
        )
    return measure


def definitions(ks: Sequence[int] = (), budgets: Sequence[int] = ()) -> dict[str, str]:
    """The written meaning of each family, keyed as reports show it (``recall_at_k``,
    ``recall_at_Bc``, ``mrr``); budget forms only when ``budgets`` are given."""
    del ks  # the meaning does not depend on the cut-off
    out: dict[str, str] = {}
    for family_name in _ORDER:
        family = FAMILIES.get(family_name)
        if RANK in family.parameters:
            out[f"{family.name}_at_k"] = family.definition
        if BUDGET in family.parameters and budgets:
            out[f"{family.name}_at_Bc"] = family.definition
        if NONE in family.parameters:
            out[family.name] = family.definition
    return out
