"""Keys that look like they hold a secret, so their values never reach a file or MLflow.

Everything a run is given is written down: Hydra saves the overrides and the composed
config under ``<run dir>/.hydra/``, ragsweep writes ``config.yaml`` and logs both to
MLflow. A key that names a secret (``api_key``, ``token``, ``password``...) is therefore
refused before Hydra writes anything; secrets are passed through environment variables
(``embedding.options.api_key_env=OPENAI_API_KEY``).

A value is secret-looking, whatever key holds it, when it contains a token shaped like a
known kind of credential (:data:`SECRET_VALUE_PATTERNS`: ``sk-...``, ``ghp_...``,
``hf_...``, ``AKIA...``, a JWT, a PEM private key...): ``embedding.options.api_key_env=sk-...``
(the key instead of the variable's name) is refused like ``api_key=...``. Messages show at
most its first 4 characters (:func:`masked`).

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
_LONG_RUN = r"(?=[A-Za-z_]*[0-9])[A-Za-z0-9_]{16,}"  # 16+ characters, a digit among them
SECRET_VALUE_PATTERNS = tuple(
    re.compile(p)
    for p in (
        rf"(?<![A-Za-z0-9])sk-(?:[A-Za-z0-9]+-){{0,3}}{_LONG_RUN}",  # OpenAI, Anthropic
        r"(?<![A-Za-z0-9])[prs]k_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
        r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
        r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}",
        r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_\-]{20,}",  # GitLab
        r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}",  # Hugging Face
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])",  # AWS access key id
        r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{30,}",  # Google API key
        r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
        r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.",  # a JWT
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
        r"(?i)(?<![A-Za-z0-9])bearer\s+[A-Za-z0-9._~+/=-]{16,}",
    )
)
"""Tokens shaped like credentials; a value containing one is secret-looking."""
SHOWN_CHARS = 4
"""At most this many characters of a secret-looking value appear in a message."""
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


def is_secret_value(value: Any) -> bool:
    """True when ``value`` (a string, or a list of them) contains a credential-shaped token
    (:data:`SECRET_VALUE_PATTERNS`)."""
    if isinstance(value, (list, tuple)):
        return any(is_secret_value(v) for v in value)
    return isinstance(value, str) and any(p.search(value) for p in SECRET_VALUE_PATTERNS)


def masked(value: Any) -> str:
    """``'sk-c…'``: the first :data:`SHOWN_CHARS` characters of a secret-looking value."""
    text = str(value)
    return repr(text[:SHOWN_CHARS] + ("…" if len(text) > SHOWN_CHARS else ""))


def holds_value(value: Any) -> bool:
    """True for a value a secret could be: a non-empty string, a number, or a list of them
    (a sweep over values). Null, ``""`` and mappings (a config node) are not."""
    if isinstance(value, (list, tuple)):
        return any(holds_value(v) for v in value)
    if isinstance(value, bool) or value is None:
        return False
    return isinstance(value, (int, float)) or (isinstance(value, str) and value != "")


def secret_keys(value: Any, prefix: str = "") -> Iterator[str]:
    """Dotted paths of the secret-looking keys in a nested mapping (lists of mappings too)
    that hold a value (:func:`holds_value`), and of any key whose value looks like a
    secret (:func:`is_secret_value`; the path says so, with the value :func:`masked`)."""
    if isinstance(value, (list, tuple)):
        for number, item in enumerate(value):
            yield from secret_keys(item, f"{prefix}{number}.")
        return
    if not isinstance(value, Mapping):
        return
    for key, child in value.items():
        path = f"{prefix}{key}"
        if is_secret_key(str(key)) and holds_value(child):
            yield path
        elif is_secret_value(child):
            yield value_note(path, child)
        yield from secret_keys(child, f"{path}.")


def value_note(where: str, value: Any) -> str:
    """``where (value 'sk-c…')``, naming a secret-looking value."""
    shown = (
        next((v for v in value if is_secret_value(v)), "")
        if isinstance(value, (list, tuple))
        else value
    )
    return f"{where} (value {masked(shown)})"


def refusal(keys: list[str], where: str) -> str:
    """The error message for secret-looking ``keys`` found in ``where`` (values omitted)."""
    listed = ", ".join(keys)
    return (
        f"{listed} looks like a secret ({where}); it was refused before anything was written, "
        "because configs are saved in the run directory (.hydra/, config.yaml) and logged to "
        "MLflow. Put the secret in an environment variable and name the variable instead "
        "(e.g. embedding=openai embedding.options.api_key_env=OPENAI_API_KEY)"
    )
