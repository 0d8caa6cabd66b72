"""The schema revision the installed MLflow expects of a SQL store, read without importing
MLflow: the alembic revision in ``mlflow/store/db_migrations/versions/`` that no other
revision there names as its ``down_revision`` (what
``mlflow.store.db.utils._get_latest_schema_revision()`` returns).

A store whose ``alembic_version`` is another revision (older: to migrate; newer: written
by a later MLflow, refused) is opened in the run's own process before any work, never left
to a logger (:func:`ragsweep.tracking.ready.store_is_ready`).
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

_REVISION = re.compile(r"^(down_revision|revision)\s*=\s*['\"]([0-9A-Za-z_]+)['\"]", re.M)


def head_from(versions: Path) -> str | None:
    """The one revision of the alembic scripts in ``versions`` that is no other's
    ``down_revision`` (None: none or several, so no head to trust)."""
    revisions: set[str] = set()
    downs: set[str] = set()
    for script in versions.glob("*.py"):
        for key, value in _REVISION.findall(script.read_text(encoding="utf-8")):
            (revisions if key == "revision" else downs).add(value)
    heads = revisions - downs
    return next(iter(heads)) if len(heads) == 1 else None


@functools.cache
def mlflow_schema_head() -> str | None:
    """The head revision of the installed MLflow's store schema (None: MLflow or its
    migration scripts not found). ``find_spec`` of a top-level package does not import it."""
    try:
        spec = importlib.util.find_spec("mlflow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        versions = Path(root) / "store" / "db_migrations" / "versions"
        if versions.is_dir():
            return head_from(versions)
    return None
