"""Shared fixtures: a small on-disk corpus + golden set, and Hydra config composition."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from ragsweep.config.app import config_dir, register_resolvers
from tests.fake_ollama import FakeModelServer

REPO = Path(__file__).resolve().parents[1]
SQUAD_FILE = REPO.parent / "shared" / "data" / "squad-v2-dev-cs224n-half" / "dev-v2.0.json"


@pytest.fixture(autouse=True, scope="session")
def _resolvers() -> None:
    """The ``ragsweep_root`` resolver, as ``ragsweep``'s entry point registers it."""
    register_resolvers()


HANDBOOK = """# Billing

## Refunds

Refunds are issued within 14 days of the request, to the original payment method.

## Export

You can export all notes as a ZIP archive from Settings > Data.
"""

LOGIN_JA = "# ログイン\n\nＶＰＮ経由でｻｰﾊﾞｰに接続できない場合は、管理者に連絡してください。\n"


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


@pytest.fixture
def mini_project(tmp_path: Path) -> Path:
    """A corpus of two documents and a golden set with every case kind."""
    return write_mini_project(tmp_path)


def write_mini_project(tmp_path: Path) -> Path:
    """The :func:`mini_project` files under ``tmp_path`` (for fixtures of wider scope)."""
    corpus = tmp_path / "corpus"
    (corpus / "ja").mkdir(parents=True)
    (corpus / "billing.md").write_text(HANDBOOK, encoding="utf-8")
    (corpus / "ja" / "login.md").write_text(LOGIN_JA, encoding="utf-8")
    write_jsonl(
        tmp_path / "golden.jsonl",
        [
            {
                "id": "q1",
                "question": "How long do refunds take?",
                "type": "factual",
                "split": "tuning",
                "evidence": [{"doc": "billing.md", "quote": "Refunds are issued within 14 days"}],
            },
            {
                "id": "q2",
                "question": "How do I export my notes?",
                "type": "procedural",
                "split": "tuning",
                "evidence": [{"doc": "billing.md", "quote": "export all notes as a ZIP archive"}],
            },
            {
                "id": "q3",
                "question": "VPN サーバー",
                "type": "factual",
                "split": "tuning",
                "scope": ["ja/login.md"],
                "evidence": [{"doc": "ja/login.md", "quote": "VPN経由でサーバーに接続できない"}],
            },
            {
                "id": "q4",
                "question": "Is there a pony?",
                "type": "negative",
                "answerable": False,
                "split": "tuning",
            },
            {
                "id": "q5",
                "question": "Refund policy?",
                "type": "factual",
                "split": "holdout",
                "evidence": [{"doc": "billing.md", "quote": "original payment method"}],
            },
        ],
    )
    return tmp_path


ComposeFn = Callable[..., DictConfig]


@pytest.fixture
def compose_config(tmp_path: Path) -> ComposeFn:
    """Compose the real ``conf/`` with overrides; outputs and MLflow go to ``tmp_path``."""

    def _compose(*overrides: str) -> DictConfig:
        base = [f"paths.output_dir={tmp_path / 'outputs'}"]
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            return compose(config_name="config", overrides=[*base, *overrides])

    return _compose


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    """A scripted Ollama / OpenAI-compatible HTTP server on 127.0.0.1 (tests/fake_ollama.py)."""
    with FakeModelServer() as server:
        yield server


@pytest.fixture(scope="session")
def migrated_mlflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow SQLite store, schema created once per session (migrations take ~5 s)."""
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def tracking_db(tmp_path: Path, migrated_mlflow_db: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh MLflow store at ``tmp_path/outputs/mlflow.db``, where ``compose_config`` points
    ``tracking.default_db``; ``MLFLOW_TRACKING_URI`` is unset so nothing goes elsewhere."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    path = tmp_path / "outputs" / "mlflow.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_mlflow_db, path)
    return path
