"""``ragsweep --help`` in a fraction of Hydra's time, printing exactly what Hydra prints.

Hydra 1.3.8 lists the config groups of the help text by asking its config loader for the
options of every group, about 120 times for ragsweep's config, and each question builds a
new config repository by deep-copying the whole one (the ConfigStore's structured configs
included): about 0.7 s of a 1 s ``ragsweep --help``. While the help is printed
(:func:`one_repository`) the loader builds that repository once per primary config and
overrides, and reuses it: the same repository would be built every time, since nothing
changes the search path between the questions. ``hydra-core`` is pinned (pyproject.toml),
so the private method this wraps should not change under it; if it is missing all the same,
the help is plain Hydra's (slower, the same text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl

HELP_FLAGS = ("--help", "-h")
"""The flags of Hydra's application help (``--hydra-help`` is Hydra's own, left as is)."""


def wants_help(argv: Sequence[str]) -> bool:
    """Whether the ``ragsweep`` command line ``argv`` asks for the application help."""
    return any(arg in HELP_FLAGS for arg in argv)


PRIVATE_METHOD = "_parse_overrides_and_create_caching_repo"
"""The method of Hydra's config loader that builds a repository for each question."""


@contextmanager
def one_repository(loader: type = ConfigLoaderImpl) -> Iterator[None]:
    """For the block, the config loader builds its caching repository once per
    ``(config_name, overrides)`` (module docstring); a ``loader`` without the private
    method is left as it is."""
    original: Callable[..., Any] | None = getattr(loader, PRIVATE_METHOD, None)
    if original is None:
        yield
        return
    built: dict[tuple[int, str | None, tuple[str, ...]], Any] = {}

    def reused(self: Any, config_name: str | None, overrides: list[str]) -> Any:
        key = (id(self), config_name, tuple(overrides))
        if key not in built:
            built[key] = original(self, config_name, overrides)
        return built[key]

    setattr(loader, PRIVATE_METHOD, reused)
    try:
        yield
    finally:
        setattr(loader, PRIVATE_METHOD, original)
