"""Importers that turn public QA datasets into a ragsweep corpus and golden set.

Each format has a Python API (e.g. :func:`import_squad`) and a subcommand of
``ragsweep-import`` registered in :data:`ragsweep.importers.cli.IMPORTERS`.
"""

from __future__ import annotations

from ragsweep.importers.squad import ImportSummary, import_squad

__all__ = ["ImportSummary", "import_squad"]
