"""Names several stages share, spelled once: the golden set's splits, MLflow's run statuses,
and the files of a run directory.

Each is a plain string constant (what is written to disk, logged or matched), so a module
that needs one imports it from here rather than spelling it again.
"""

from __future__ import annotations

# --- golden-set splits ----------------------------------------------------------------------

TUNING = "tuning"
"""The split every run and sweep scores by default."""
HOLDOUT = "holdout"
"""The split a chosen configuration is promoted to, once (docs/promotion.md)."""
SPLITS = (TUNING, HOLDOUT)

# --- where a golden case came from, and whether it is scored yet ---------------------------

ORIGIN_HAND = "hand"
"""A case a person wrote (the default of a golden line's ``origin``)."""
ORIGIN_DRAFTED = "drafted"
"""A case a model drafted (``ragsweep-golden draft``) and a person accepted."""
ORIGINS = (ORIGIN_HAND, ORIGIN_DRAFTED)
STATUS_DRAFT = "draft"
"""A golden line's ``status`` while nobody has accepted it: never loaded, never scored."""

# --- MLflow run statuses ------------------------------------------------------------------

RUNNING = "RUNNING"
SCHEDULED = "SCHEDULED"
FINISHED = "FINISHED"
FAILED = "FAILED"
KILLED = "KILLED"
ENDED = frozenset({FINISHED, FAILED, KILLED})
"""Statuses of a run that will not log again unless resumed."""

# --- the files of a run directory ---------------------------------------------------------

CASES_FILE = "cases.jsonl"
"""Per-case results (one JSON object a line)."""
CHUNKS_FILE = "chunks.jsonl"
"""The retrieved chunks, with text (kept in the run directory, not uploaded)."""
RECORD_FILE = "record.json"
"""Everything needed to log the run later (``ragsweep-log RUN_DIR``)."""
TABLE_FILE = "cases_table.json"
"""The per-case table the MLflow UI shows."""

# --- top-level config keys that are not part of a configuration -----------------------------

SWEEP_KEY = "sweep"
"""``sweep=NAME``: which sweep file ``-m`` runs (conf/sweep/)."""
VERBOSE_KEY = "verbose"
"""``verbose=true`` (``-v``): each job of ``-m`` prints its whole summary, not one line."""
NOT_REPRODUCED = frozenset({SWEEP_KEY, VERBOSE_KEY})
"""Override keys a ``reproduce:`` command leaves out: they choose how to run, not what."""

ACL_PRE = "pre"
ACL_POST = "post"
ACL_OFF = "off"
ACL_MODES = (ACL_PRE, ACL_POST, ACL_OFF)
"""``retrieval.acl``: filter a case's candidates by its principal before ranking, drop what it
may not read after ranking and refill from deeper, or no filter (to measure what leaks)."""

PERMISSION_TYPE = "permission"
"""The golden case type of a permission case: a question whose only evidence is in documents
its ``principal`` may not read, scored as "nothing restricted retrieved", not as recall."""

# --- chunk size units (chunking.unit) --------------------------------------------------------

CHARS = "chars"
"""``chunking.unit=chars``: sizes in characters (code points), the unit of every offset."""
TOKENS = "tokens"
"""``chunking.unit=tokens``: sizes in the tokens of a tokenizer (:mod:`ragsweep.chunk.tokens`)."""
CHUNK_UNITS = (CHARS, TOKENS)
