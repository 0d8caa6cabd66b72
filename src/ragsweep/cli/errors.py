"""Errors around the Hydra app: what the ``ragsweep`` command checks before Hydra starts,
and how Hydra's own composition errors are reported.

Hydra prints its errors itself and exits with status 1; ragsweep's own errors exit with
status 2 and suggest the closest allowed value. :func:`reported_errors` makes Hydra raise
instead (``HYDRA_FULL_ERROR=1`` for the duration of the app, unless the user set it) and
reports a mistyped key, an unknown config group option, a bad override or any
:class:`~ragsweep.core.errors.RagsweepError` the same way: ``error: ...`` on stderr, status 2.
Anything else (a bug) keeps its traceback.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import PurePosixPath

from hydra.errors import CompactHydraException, HydraException, MissingConfigException
from omegaconf.errors import OmegaConfBaseException

from ragsweep.core.errors import ConfigError, RagsweepError
from ragsweep.core.secret_keys import (
    holds_value,
    is_secret_key,
    is_secret_value,
    refusal,
    secret_keys,
    value_note,
)
from ragsweep.release.errors import EMPTY_RUN_ID

USER_ERROR_STATUS = 2
FULL_ERROR_ENV = "HYDRA_FULL_ERROR"


def run_id_argument(text: str) -> str:
    """An argparse ``type`` for a run id: an empty or blank one is refused (it never means
    "the newest run": only ``--best`` and ``--latest`` do)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(EMPTY_RUN_ID)
    return text


def nonempty_argument(text: str) -> str:
    """An argparse ``type`` refusing an empty value (``--tracking-uri ""`` or a run
    directory ``""`` would otherwise silently mean the default or the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty value; leave it out for the default")
    return text


def command_line_overrides(argv: Sequence[str]) -> list[str]:
    """The override arguments of a ``ragsweep`` command line (flags such as ``-m``,
    ``--cfg job`` or ``--config-dir DIR`` left out), as Hydra's own parser sees them."""
    from hydra._internal.utils import get_args_parser

    known, _ = get_args_parser().parse_known_args(list(argv))
    return list(known.overrides or [])


def secret_overrides(overrides: Sequence[str]) -> list[str]:
    """The keys among ``overrides`` that look like secrets (:mod:`ragsweep.core.secret_keys`),
    including keys inside a mapping value (``embedding.options={api_key: ...}``).
    Deletions are fine; unparsable overrides are left to Hydra to report."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    found: list[str] = []
    for text in overrides:
        try:
            override = parser.parse_override(text)
        except HydraException:  # a syntax error: Hydra reports it when it parses the overrides
            continue
        if override.is_delete():
            continue
        key, value = override.key_or_group, override.value()
        if is_secret_key(key) and (override.is_sweep_override() or holds_value(value)):
            found.append(key)
        if isinstance(value, Mapping):
            found.extend(secret_keys(value, f"{key}."))
    return found


def secret_arguments(argv: Sequence[str]) -> list[str]:
    """Every argument (an override's value, a flag's value, anything) holding a
    secret-looking value (:func:`~ragsweep.core.secret_keys.is_secret_value`), named by its
    key (the text before ``=``) with the value masked."""
    found: list[str] = []
    for number, arg in enumerate(argv, start=1):
        if is_secret_value(arg):
            key, equals, _ = arg.partition("=")
            where = key if equals and not is_secret_value(key) else f"argument {number}"
            found.append(value_note(where, arg.partition("=")[2] if equals else arg))
    return found


def check_command_line(argv: Sequence[str]) -> None:
    """Raise ConfigError before Hydra starts (and writes ``.hydra/``) when an override sets
    a secret-looking key, or any argument holds a secret-looking value; the message never
    repeats the value (4 characters at most)."""
    found = secret_overrides(command_line_overrides(argv))
    named = {key.lstrip("+~") for key in found}
    found += [n for n in secret_arguments(argv) if n.split(" ")[0].lstrip("+~") not in named]
    if found:
        raise ConfigError(refusal(found, "given on the command line"))


@contextmanager
def reported_errors() -> Iterator[None]:
    """Run the Hydra app with user errors reported as ``error: ...`` and status 2."""
    user_asked_for_traces = bool(os.environ.get(FULL_ERROR_ENV))
    if not user_asked_for_traces:
        os.environ[FULL_ERROR_ENV] = "1"  # Hydra raises instead of printing and exiting 1
    try:
        yield
    except Exception as exc:
        message = user_error_message(exc)
        if message is None or (user_asked_for_traces and not isinstance(exc, RagsweepError)):
            raise
        print(f"error: {message}", file=sys.stderr)
        sys.exit(USER_ERROR_STATUS)
    finally:
        if not user_asked_for_traces:
            os.environ.pop(FULL_ERROR_ENV, None)


def user_error_message(exc: BaseException) -> str | None:
    """The one-paragraph message for an error caused by the command line or the config
    files, or None for anything else (a bug: keep the traceback)."""
    for kind, describe in _DESCRIBERS:
        if isinstance(exc, kind):
            return describe(exc)
    return None


def _ragsweep(exc: BaseException) -> str:
    return str(exc)


def _missing_option(exc: BaseException) -> str:
    """``chunking=headings`` → ``chunking='headings' is not one of: ...; did you mean``."""
    assert isinstance(exc, MissingConfigException)
    if not exc.options or not exc.missing_cfg_file:
        return _hydra(exc)
    missing = PurePosixPath(exc.missing_cfg_file)
    group, name = missing.parent.as_posix(), missing.name
    options = sorted(exc.options)
    return f"{group}={name!r} is not one of: {', '.join(options)}{_closest(name, options, repr)}"


def _hydra(exc: BaseException) -> str:
    """Hydra's own message without the config search path listing, plus the omegaconf cause
    (a mistyped key gets the keys allowed where it was meant, and the closest one)."""
    text = str(exc).split("\nConfig search path:")[0].strip()
    unknown = _unknown_key(exc.__cause__)
    return unknown if unknown is not None else text


def _unknown_key(cause: BaseException | None) -> str | None:
    """For omegaconf's "key not in struct": ``chunking.sise is not a known key (allowed:
    ...); did you mean chunking.size?``."""
    if not isinstance(cause, OmegaConfBaseException):
        return None
    full_key = getattr(cause, "full_key", None)
    parent = getattr(cause, "parent_node", None)
    if not full_key or not isinstance(parent, Mapping):
        return None
    prefix, _, name = str(full_key).rpartition(".")
    allowed = sorted(str(k) for k in parent)
    hint = _closest(name, allowed, lambda close: f"{prefix}.{close}" if prefix else close)
    return f"{full_key} is not a known key (allowed: {', '.join(allowed)}){hint}"


def _omegaconf(exc: BaseException) -> str:
    return str(exc).strip()


def _closest(name: str, choices: Sequence[str], shown: Callable[[str], str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {shown(close[0])}?" if close else ""


_DESCRIBERS: tuple[tuple[type[BaseException], Callable[[BaseException], str]], ...] = (
    (RagsweepError, _ragsweep),
    (MissingConfigException, _missing_option),
    (CompactHydraException, _hydra),
    (OmegaConfBaseException, _omegaconf),
)
"""Error kinds reported without a traceback, first match wins (a registry, not a chain)."""
