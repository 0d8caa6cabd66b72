"""Keys that look like they hold a secret, so their values never reach a file or MLflow.

Everything a run is given is written down: Hydra saves the overrides and the composed
config under ``<run dir>/.hydra/``, ragsweep writes ``config.yaml`` and logs both to
MLflow. A key that names a secret (``api_key``, ``token``, ``password``...) is therefore
refused before Hydra writes anything; secrets are passed through environment variables
(``embedding.options.api_key_env=OPENAI_API_KEY``).

A key is secret-looking when its last component, split into words at ``_``, ``-``, ``.``
and camelCase humps, contains one of :data:`SECRET_WORDS` or one of
:data:`SECRET_WORD_PAIRS` in a row, unless its last word is one of :data:`REFERENCE_WORDS`
(it names an environment variable or a file that holds the secret, not the secret itself).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping
from typing import Any

SECRET_WORDS = frozenset(
    {
        "apikey",
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "credential",
        "credentials",
        "bearer",
    }
)
SECRET_WORD_PAIRS = frozenset(
    {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key"), ("auth", "key")}
)
REFERENCE_WORDS = frozenset({"env", "file", "path"})
_WORD_SPLIT = re.compile(r"[_\-.]+")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")  # apiKey -> api_Key


def is_secret_key(key: str) -> bool:
    """True when the last component of the dotted ``key`` names a secret (module doc)."""
    name = _CAMEL_HUMP.sub("_", key.rsplit(".", 1)[-1].lstrip("+~"))
    words = [w for w in _WORD_SPLIT.split(name.lower()) if w]
    if not words or words[-1] in REFERENCE_WORDS:
        return False
    if SECRET_WORDS.intersection(words):
        return True
    return any(pair in SECRET_WORD_PAIRS for pair in itertools.pairwise(words))


def holds_value(value: Any) -> bool:
    """True for a value a secret could be: a non-empty string, a number, or a list of them
    (a sweep over values). Null, ``""`` and mappings (a config node) are not."""
    if isinstance(value, (list, tuple)):
        return any(holds_value(v) for v in value)
    if isinstance(value, bool) or value is None:
        return False
    return isinstance(value, (int, float)) or (isinstance(value, str) and value != "")


def secret_keys(value: Any, prefix: str = "") -> Iterator[str]:
    """Dotted paths of the secret-looking keys in a nested mapping that hold a value
    (:func:`holds_value`)."""
    if not isinstance(value, Mapping):
        return
    for key, child in value.items():
        path = f"{prefix}{key}"
        if is_secret_key(str(key)) and holds_value(child):
            yield path
        yield from secret_keys(child, f"{path}.")


def refusal(keys: list[str], where: str) -> str:
    """The error message for secret-looking ``keys`` found in ``where`` (values omitted)."""
    listed = ", ".join(keys)
    return (
        f"{listed} looks like a secret ({where}); it was refused before anything was written, "
        "because configs are saved in the run directory (.hydra/, config.yaml) and logged to "
        "MLflow. Put the secret in an environment variable and name the variable instead "
        "(e.g. embedding=openai embedding.options.api_key_env=OPENAI_API_KEY)"
    )
