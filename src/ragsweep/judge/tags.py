"""The MLflow tag keys the judge stage sets on a run, in one place (their meaning is in
docs/judge.md, "Outputs"). Values that are unknown are logged as ``none``/``unknown``."""

from __future__ import annotations

from typing import NamedTuple

PREFIX = "ragsweep.judge."

API = PREFIX + "api"
"""``ollama`` or ``openai`` (``judge.api``)."""
SERVER_VERSION = PREFIX + "server_version"
"""The chat server's version as it reports it (``unknown`` if it does not)."""
GENERATOR = PREFIX + "generator"
"""The configured generator (``answers:<file>`` for fixed answers)."""
GENERATOR_ID = PREFIX + "generator_id"
"""The model id the server serves the generator under."""
GENERATOR_DIGEST = PREFIX + "generator_digest"
"""sha256 of the generator's weights or manifest, ``none`` when the server gives no way to
know it (see ``GENERATOR_DIGEST_SOURCE``)."""
GENERATOR_DIGEST_SOURCE = PREFIX + "generator_digest_source"
"""``ollama-manifest``, ``file-sha256``, ``answers-file`` or ``none``."""
GENERATOR_VERSION = PREFIX + "generator_version"
"""The hash of the server's listing entry for the generator (``models:<hash>``)."""
JUDGE = PREFIX + "judge"
JUDGE_ID = PREFIX + "judge_id"
JUDGE_DIGEST = PREFIX + "judge_digest"
JUDGE_DIGEST_SOURCE = PREFIX + "judge_digest_source"
JUDGE_VERSION = PREFIX + "judge_version"


class ModelTags(NamedTuple):
    """The tag keys that identify one model role."""

    name: str
    served_id: str
    digest: str
    digest_source: str
    version: str


GENERATOR_TAGS = ModelTags(
    GENERATOR, GENERATOR_ID, GENERATOR_DIGEST, GENERATOR_DIGEST_SOURCE, GENERATOR_VERSION
)
JUDGE_TAGS = ModelTags(JUDGE, JUDGE_ID, JUDGE_DIGEST, JUDGE_DIGEST_SOURCE, JUDGE_VERSION)

RUBRIC = PREFIX + "rubric_sha256"
"""sha256 of the rubric's content."""
TEMPERATURE = PREFIX + "temperature"
SEED = PREFIX + "seed"
OUTPUT_MODE = PREFIX + "output_mode"
"""How JSON verdicts were asked for (``json_schema``, ``json_object+schema``,
``ollama-format-schema``, ...); several, comma-separated, if cached verdicts differ."""
SCHEMA_HONOURED = PREFIX + "schema_honoured"
"""``true``: the verdict schema was sent and no reply broke it; ``false``: a reply broke it
(the server ignored the schema); ``not_requested``: no mode carrying the schema was accepted."""
AGREEMENT_BELOW_FLOOR = PREFIX + "agreement_below_floor"
"""Axes whose agreement with human verdicts is below a floor, or ``none``."""
