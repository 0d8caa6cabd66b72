"""MLflow metric keys for question types: any type name maps to a valid, unique, stable key.

Question types come from the golden set and may be any text (``R&D``, ``C++``,
``how-to (UI)``, ``50%``), but MLflow accepts metric names made only of letters, digits,
``_ - . : /`` and spaces, at most 250 characters, that do not normalize to another path.
A type becomes one path segment of keys such as ``by_type/<segment>/recall_at_5``:

- a name MLflow accepts as a segment is used as it is (``factual``, ``multi-hop``,
  ``ログイン``), so existing keys never change;
- any other name becomes a slug (each run of other characters → ``_``, at most
  ``SLUG_CHARS`` characters) plus ``-`` and the first ``HASH_CHARS`` hex digits of the
  name's sha256: ``R&D`` → ``R_D-<hash>``. A name that already ends like that is hashed
  too, so a verbatim key never equals a hashed one; two hashed keys are equal only if two
  names share a 40-bit hash prefix, which :func:`type_segments` reports.

The run keeps the original names in ``report.md`` and ``cases.jsonl``, and tags the mapping
of the renamed types (``ragsweep.type_keys``, JSON ``{segment: type}``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from ragsweep.core import tags as tag
from ragsweep.core.hashing import sha256_text

SEGMENT = re.compile(r"^[\w.\- :]+$")
"""MLflow's character rule for names (``mlflow.utils.validation``), without ``/``."""
OTHER = re.compile(r"[^\w.\- :]+")
LOOKS_HASHED = re.compile(r"-[0-9a-f]{10}$")
HASH_CHARS = 10
SLUG_CHARS = 80

N_ANSWERABLE = "n_answerable"
"""Answerable cases of the evaluated split (the n of every mean)."""
N_CHUNKS = "n_chunks"
"""Chunks in the run's index."""
BY_TYPE = "by_type"
"""The prefix of per-question-type keys (:func:`by_type_key`)."""
ACL_LEAKS = "acl_leaks"
"""Retrieved chunks (within the scored depth) of documents the case's principal may not read."""
REVOKED_RETRIEVED = "revoked_retrieved"
"""Retrieved chunks of revoked documents."""
SUPERSEDED_RETRIEVED = "superseded_retrieved"
"""Retrieved chunks of superseded documents (an older version of another document)."""
ACCESS_COUNTS = (ACL_LEAKS, REVOKED_RETRIEVED, SUPERSEDED_RETRIEVED)
"""The per-case access counts, summed over a run's cases (docs/metrics.md, "Access
measures")."""
CASES_WITH_ACL_LEAKS = "cases_with_acl_leaks"
"""Cases with at least one ``acl_leaks`` chunk."""
N_PERMISSION = "n_permission"
"""Permission cases of the evaluated split."""
PERMISSION_HELD = "permission_held"
"""Share of the permission cases with no ``acl_leaks`` (their score: nothing restricted
retrieved)."""
BY_ORIGIN = "by_origin"
"""The prefix of per-origin keys (``by_origin/<origin>/<metric>``: ``hand`` or ``drafted``,
names MLflow accepts as they are)."""
JUDGE = "judge"
"""The prefix of the judge's keys (``judge/<metric>``)."""
JUDGE_BY_TYPE = f"{JUDGE}/{BY_TYPE}"
"""The prefix of the judge's per-type keys (``judge/by_type/<segment>/<metric>``)."""


def budget_key(name: str, budget: int) -> str:
    """``<name>_at_<budget>c``: a count within a context budget (``acl_leaks_at_2000c``)."""
    return f"{name}_at_{budget}c"


def access_keys(budgets: Iterable[int]) -> list[str]:
    """Every overall access figure a run with ``budgets`` can have, in report order."""
    at_budget = [budget_key(ACL_LEAKS, b) for b in budgets]
    return [*ACCESS_COUNTS, *at_budget, CASES_WITH_ACL_LEAKS, N_PERMISSION, PERMISSION_HELD]


def type_segment(name: str) -> str:
    """The key segment of question type ``name`` (see module docstring)."""
    if _verbatim(name):
        return name
    slug = OTHER.sub("_", name).strip(" ")[:SLUG_CHARS].strip(" ") or "type"
    return f"{slug}-{sha256_text(name)[:HASH_CHARS]}"


def _verbatim(name: str) -> bool:
    return (
        bool(SEGMENT.match(name))
        and len(name) <= SLUG_CHARS
        and name == name.strip(" ")
        and name not in (".", "..")
        and not LOOKS_HASHED.search(name)
    )


def type_segments(names: Iterable[str]) -> dict[str, str]:
    """``{type: segment}`` for ``names``; a ValueError if two types would share a key."""
    segments: dict[str, str] = {}
    owners: dict[str, str] = {}
    for name in names:
        segment = type_segment(name)
        if owners.setdefault(segment, name) != name:
            raise ValueError(
                f"question types {owners[segment]!r} and {name!r} map to the same metric key "
                f"segment {segment!r}; rename one of them in the golden set"
            )
        segments[name] = segment
    return segments


def by_type_key(type_name: str, metric: str, prefix: str = BY_TYPE) -> str:
    """``by_type/<segment>/<metric>`` (``prefix`` e.g. ``judge/by_type``)."""
    return f"{prefix}/{type_segment(type_name)}/{metric}"


def key_tags(names: Iterable[str]) -> dict[str, str]:
    """The ``ragsweep.type_keys`` tag for the types whose segment is not their name
    (no tag when every name is used as it is)."""
    renamed = {s: n for n, s in type_segments(names).items() if s != n}
    if not renamed:
        return {}
    return {tag.TYPE_KEYS: json.dumps(renamed, ensure_ascii=False, sort_keys=True)}


def type_names(tags: Mapping[str, str], segments: Iterable[str]) -> set[str]:
    """The question types behind metric key ``segments`` of a logged run (its tags hold the
    mapping of renamed types)."""
    renamed = json.loads(tags.get(tag.TYPE_KEYS, "{}"))
    return {renamed.get(segment, segment) for segment in segments}
