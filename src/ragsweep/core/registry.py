"""Name → implementation registries that reject duplicates and suggest near matches.

Used instead of if/elif chains on names: chunkers, normalizers, retrieval backends and
measure families register themselves under a unique name, and a lookup of an unknown name fails
with the allowed names and the closest match.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from ragsweep.core.errors import ConfigError

T = TypeVar("T")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` naming the closest of ``choices`` to ``name``, or ``""``."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class Registry(Generic[T]):
    """A named set of implementations for one pipeline role (e.g. ``chunking.mode``)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering ``item`` under ``name``; a second registration is an error."""

        def add(item: T) -> T:
            self.add(name, item)
            return item

        return add

    def add(self, name: str, item: T) -> None:
        if name in self._items:
            raise ValueError(f"{self.key}: {name!r} is already registered")
        self._items[name] = item

    def get(self, name: str) -> T:
        """Return the implementation for ``name`` or raise a ConfigError naming the key."""
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        allowed = ", ".join(sorted(self._items))
        return f"{self.key}={name!r} is not one of: {allowed}{did_you_mean(name, self._items)}"

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))
