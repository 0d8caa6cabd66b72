"""A run composed once: Hydra's ``get_mode`` answered from the command line.

Hydra 1.3.8 composes the whole config twice for every command that runs: once only to read
``hydra.mode`` (``Hydra.get_mode``), then again to run. Each composition of ragsweep's
config costs about 0.2 s of CPU, a quarter of a warm demo run with tracking off
(bench/README.md, issue 31). When the config names no mode (ragsweep's does not), Hydra
takes it from the command line anyway: ``-m`` runs a multirun, anything else one run, and
it adds ``hydra.mode=RUN`` or ``hydra.mode=MULTIRUN`` to the overrides itself. So ragsweep
answers ``get_mode`` from the command line without composing (:func:`mode_from_command_line`):
a ``hydra.mode=...`` override there is the mode; otherwise there is none and ``-m`` decides,
as above. The one difference: a ``hydra.mode`` written in a config file is not read (``-m``
decides; ``hydra.mode=MULTIRUN`` on the command line still works). An override of
``hydra.mode`` written any other way (``++hydra.mode=...``, quoted) leaves the question to
Hydra's own ``get_mode``, which composes. ``hydra-core`` is pinned (pyproject.toml); if the
method is missing all the same, Hydra's own is used.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hydra._internal.hydra import Hydra
from hydra.types import RunMode

MODE_OVERRIDE = "hydra.mode="
MODE_KEY = "hydra.mode"
METHOD = "get_mode"


def mode_of(overrides: Sequence[str]) -> RunMode | None:
    """The run mode a ``hydra.mode=...`` override names (the last one wins), else None."""
    named = [o[len(MODE_OVERRIDE) :] for o in overrides if o.startswith(MODE_OVERRIDE)]
    if not named:
        return None
    try:
        return RunMode[named[-1].strip()]
    except KeyError:
        return None  # Hydra's composition reports the bad value


@contextmanager
def mode_from_command_line(hydra: type = Hydra) -> Iterator[None]:
    """For the block, ``Hydra.get_mode`` composes nothing (module docstring)."""
    original = getattr(hydra, METHOD, None)
    if original is None:
        yield
        return

    def get_mode(self: Any, config_name: str | None, overrides: list[str]) -> RunMode | None:
        plain = [o for o in overrides if o.startswith(MODE_OVERRIDE)]
        if len(plain) < sum(MODE_KEY in o for o in overrides):  # another spelling: Hydra's
            return original(self, config_name, overrides)
        return mode_of(overrides)

    setattr(hydra, METHOD, get_mode)
    try:
        yield
    finally:
        setattr(hydra, METHOD, original)
