"""Text normalization for indexed chunk text and for queries.

Preprocessing never touches chunk offsets: chunks keep pointing at the source text, and only
the text handed to the index (and the query text) is transformed, by the same
:class:`Preprocessor`, so both sides always agree.

Steps (``preprocess.steps``, applied in order) come from the ``NORMALIZERS`` registry:

- ``nfkc``: Unicode NFKC (full-width Latin → ASCII, half-width katakana → full-width, ...).
- ``cleanup``: drops Markdown decoration (heading marks, emphasis, table pipes, rules) and
  collapses whitespace runs to one space.
- ``casefold``: Unicode case folding.
- ``synonyms``: rewrites every spelling variant of a group to the group's first entry.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from ragsweep.config.schema import PreprocessConfig
from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import sha256_file, sha256_json
from ragsweep.core.registry import Registry

TextFn = Callable[[str], str]


@dataclass(frozen=True)
class SynonymGroup:
    """Spellings of one term; ``canonical`` is what every variant is rewritten to."""

    canonical: str
    variants: tuple[str, ...]


NORMALIZERS: Registry[Callable[[PreprocessConfig], TextFn]] = Registry("preprocess.steps")


@NORMALIZERS.register("nfkc")
def _nfkc_step(cfg: PreprocessConfig) -> TextFn:
    return lambda text: unicodedata.normalize("NFKC", text)


@NORMALIZERS.register("casefold")
def _casefold_step(cfg: PreprocessConfig) -> TextFn:
    return str.casefold


_BLOCK_DECORATION = re.compile(
    r"^\s{0,3}#{1,6}\s+"  # ATX heading marks
    r"|^\s{0,3}(?:[-*_=]\s*){3,}$"  # rules and setext underlines
    r"|^\s*>\s?"  # block quotes
    r"|\|",  # table pipes
    re.MULTILINE,
)
_INLINE_DECORATION = re.compile(r"\*\*|__|`{1,3}|~~")  # emphasis, code ticks, strike-through
_WHITESPACE = re.compile(r"\s+")


def cleanup(text: str) -> str:
    """Remove Markdown decoration and collapse whitespace runs to a single space."""
    text = _INLINE_DECORATION.sub("", _BLOCK_DECORATION.sub(" ", text))
    return _WHITESPACE.sub(" ", text).strip()


@NORMALIZERS.register("cleanup")
def _cleanup_step(cfg: PreprocessConfig) -> TextFn:
    return cleanup


@NORMALIZERS.register("synonyms")
def _synonyms_step(cfg: PreprocessConfig) -> TextFn:
    assert cfg.synonyms_path is not None  # guaranteed by PreprocessConfig validation
    return synonym_rewriter(load_synonyms(Path(cfg.synonyms_path)))


def load_synonyms(path: Path) -> list[SynonymGroup]:
    """Read a YAML file ``{groups: [[canonical, variant, ...], ...]}``.

    A variant listed in two groups is an error: the rewrite would depend on group order.
    """
    if not path.is_file():
        raise ConfigError(f"preprocess.synonyms_path={path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not a valid UTF-8 YAML file ({exc})") from None
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        raise ConfigError(f"{path}: expected a top-level 'groups:' list of variant lists")
    seen: dict[str, int] = {}
    result = []
    for number, group in enumerate(groups, start=1):
        if not (
            isinstance(group, list)
            and len(group) >= 2
            and all(isinstance(v, str) and v.strip() for v in group)
        ):
            raise ConfigError(f"{path}: group {number} must list at least two non-empty strings")
        for variant in group:
            if variant in seen and seen[variant] != number:
                raise ConfigError(
                    f"{path}: {variant!r} appears in groups {seen[variant]} and {number}"
                )
            seen[variant] = number
        result.append(SynonymGroup(canonical=group[0], variants=tuple(group[1:])))
    return result


def synonym_rewriter(groups: Sequence[SynonymGroup]) -> TextFn:
    """A function replacing each variant by its canonical form.

    Longest variants are tried first so that ``log in`` wins over ``log``. Variants made of
    word characters only match at word boundaries (``login`` does not rewrite ``logins``...
    except as a whole word) and ignore case; others (katakana, symbols) match anywhere.
    """
    mapping: dict[str, str] = {}
    for group in groups:
        # The canonical form maps to itself so that it wins over a variant it contains
        # (サーバー must not become サーバーー through its variant サーバ).
        for variant in (group.canonical, *group.variants):
            mapping[variant.casefold()] = group.canonical
    if not mapping:
        return lambda text: text
    alternatives = sorted(mapping, key=len, reverse=True)
    pattern = re.compile("|".join(_variant_pattern(v) for v in alternatives), re.IGNORECASE)
    return lambda text: pattern.sub(lambda m: mapping[m.group(0).casefold()], text)


def _variant_pattern(variant: str) -> str:
    escaped = re.escape(variant)
    if re.fullmatch(r"[\w\s-]+", variant, re.ASCII):
        return rf"(?<!\w){escaped}(?!\w)"
    return escaped


@dataclass(frozen=True)
class Preprocessor:
    """The text transformation shared by index and query side.

    ``identity`` is what indexes record and what the query side is checked against.
    """

    steps: tuple[str, ...]
    synonyms_digest: str | None
    functions: tuple[TextFn, ...]

    def __call__(self, text: str) -> str:
        for function in self.functions:
            text = function(text)
        return text

    @property
    def identity(self) -> dict[str, object]:
        return {"steps": list(self.steps), "synonyms_sha256": self.synonyms_digest}

    @property
    def key(self) -> str:
        """sha256 of ``identity``."""
        return sha256_json(self.identity)


def build_preprocessor(cfg: PreprocessConfig) -> Preprocessor:
    """Validate the steps and build the preprocessor; unknown steps fail with suggestions."""
    functions = tuple(NORMALIZERS.get(step)(cfg) for step in cfg.steps)
    digest = None
    if "synonyms" in cfg.steps and cfg.synonyms_path is not None:
        digest = sha256_file(cfg.synonyms_path)  # the file was read and checked above
    return Preprocessor(steps=cfg.steps, synonyms_digest=digest, functions=functions)
