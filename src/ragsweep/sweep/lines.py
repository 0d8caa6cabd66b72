"""Where a key of a sweep file is: its line, found on the YAML node tree (so ``chunking.size``
under ``baseline`` and the same key under ``axes`` are told apart), for messages that blame
``file:line``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import yaml

Part = str | int
"""A step of a key path: a mapping key (``chunking.size``) or a list index."""

_PATH = re.compile(r"^sweep((?:\.[^\s:\[=]+|\[\d+\])+)")
_STEP = re.compile(r"\.([^\s.\[=]+)|\[(\d+)\]")


def node_line(path: Path, parts: Sequence[Part]) -> int | None:
    """The 1-based line of the deepest node of ``parts`` found in the YAML file ``path``
    (a long-form axis' keys are found under its ``values``), or None."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    line = None
    rest = list(parts)
    while node is not None and rest:
        node, rest, found = _step(node, rest)
        line = found if found is not None else line
    return line


def _step(node: yaml.Node, rest: list[Part]) -> tuple[yaml.Node | None, list[Part], int | None]:
    """One step down: the child, the parts left, and the child key's line."""
    if isinstance(node, yaml.SequenceNode) and isinstance(rest[0], int):
        if rest[0] < len(node.value):
            child = node.value[rest[0]]
            return child, rest[1:], child.start_mark.line + 1
        return None, [], None
    if not isinstance(node, yaml.MappingNode):
        return None, [], None
    keys = {str(k.value): (k, v) for k, v in node.value}
    for size in range(len(rest), 0, -1):  # dotted keys: baseline's ``chunking.size``
        if all(isinstance(p, str) for p in rest[:size]):
            joined = ".".join(str(p) for p in rest[:size])
            if joined in keys:
                key, value = keys[joined]
                return value, rest[size:], key.start_mark.line + 1
    if "values" in keys:  # a long-form axis
        return keys["values"][1], rest, None
    return None, [], None


def message_parts(message: str) -> list[Part]:
    """The key path a validation message starts with: ``sweep.axes[1].allow_multi_factr is
    not a known key`` → ``["axes", 1, "allow_multi_factr"]``."""
    match = _PATH.match(message)
    if not match:
        return []
    return [int(i) if i else str(k) for k, i in _STEP.findall(match.group(1))]


def located(path: Path, parts: Sequence[Part]) -> str:
    """``path:line`` of the key ``parts`` in the sweep file, or ``path`` when not found."""
    line = node_line(path, parts) if parts else None
    return f"{path}:{line}" if line else str(path)
