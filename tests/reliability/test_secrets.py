"""A secret passed by mistake never reaches a file or MLflow (issue 12, item 9): it is
refused before Hydra writes the run directory's ``.hydra/`` files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragsweep.core.secret_keys import is_secret_key, is_secret_value, masked
from tests.reliability.conftest import files_containing, run_command
from tests.run.test_pipeline import project_overrides

SECRET = "sk-test-9f8e7d6c5b4a39281706"


def user_args(project: Path, out: Path) -> list[str]:
    return [
        f"paths.output_dir={out}",
        f"tracking.uri=sqlite:///{out / 'mlflow.db'}",
        *project_overrides(project),
    ]


@pytest.mark.parametrize(
    ("flags", "overrides"),
    [
        ([], ["+embedding.options.api_key=" + SECRET]),
        ([], ["embedding=openai", "+embedding.options.api_key=" + SECRET]),
        (["-m"], ["+embedding.options.api_key=" + SECRET]),
        (["--cfg", "job"], ["+embedding.options.api_key=" + SECRET]),
        ([], ["+tracking.tags.hf_token=" + SECRET]),
        ([], ["hydra.job.env_set.OPENAI_API_KEY=" + SECRET]),
        ([], ["embedding.options={api_key:" + SECRET + "}"]),
    ],
)
def test_a_secret_on_the_command_line_reaches_no_file(
    tmp_path: Path, mini_project: Path, flags: list[str], overrides: list[str]
) -> None:
    out_dir = tmp_path / "out"
    out = run_command(
        "ragsweep", *flags, *user_args(mini_project, out_dir), *overrides, cwd=tmp_path
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert "looks like a secret (given on the command line)" in out.stderr
    assert "api_key_env" in out.stderr
    assert SECRET not in out.stdout + out.stderr
    assert not out_dir.exists()  # no run directory, no .hydra/, no MLflow store
    assert files_containing(tmp_path, SECRET.encode()) == []


def test_a_secret_in_a_config_file_is_refused_before_hydra_writes(
    tmp_path: Path, mini_project: Path
) -> None:
    extra = tmp_path / "myconf"
    (extra / "embedding").mkdir(parents=True)
    (extra / "embedding" / "leaky.yaml").write_text(
        "backend: openai\nmodel: m\noptions:\n  base_url: http://127.0.0.1:9/v1\n"
        f"  api_key: {SECRET}\n",
        encoding="utf-8",
    )
    out_dir = tmp_path / "out"
    out = run_command(
        "ragsweep",
        "--config-dir",
        str(extra),
        *user_args(mini_project, out_dir),
        "embedding=leaky",
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert "embedding.options.api_key looks like a secret (in the composed config)" in out.stderr
    assert SECRET not in out.stdout + out.stderr
    assert [p for p in files_containing(tmp_path, SECRET.encode()) if extra not in p.parents] == []


def test_naming_the_environment_variable_is_fine(tmp_path: Path, mini_project: Path) -> None:
    out = run_command(
        "ragsweep",
        "--cfg",
        "job",
        *user_args(mini_project, tmp_path / "out"),
        "embedding=openai",
        "embedding.options.api_key_env=OPENAI_API_KEY",
        "judge=ollama",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "api_key_env: OPENAI_API_KEY" in out.stdout


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("embedding.options.api_key", True),
        ("apiKey", True),
        ("x.accessKey", True),
        ("embedding.options.apikey", True),
        ("x.access_key", True),
        ("x.hf_token", True),
        ("x.password", True),
        ("x.client_secret", True),
        ("embedding.options.api_key_env", False),
        ("x.token_file", False),
        ("x.password_path", False),
        ("judge.answer_tokens", False),
        ("chunking.size", False),
        ("preprocess.tokenizer", False),
        ("hydra.callbacks.reject_secret_keys", True),  # a key name; its value is a node
    ],
)
def test_which_keys_look_like_secrets(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


KEY_AS_VALUE = "sk-canary-4f3e2d1c0b9a8f7e6d5c"


@pytest.mark.parametrize(
    ("flags", "overrides"),
    [
        ([], ["embedding=openai", "embedding.options.api_key_env=" + KEY_AS_VALUE]),
        (["-m"], ["+tracking.tags.note=a," + KEY_AS_VALUE]),
    ],
)
def test_a_key_typed_into_any_setting_reaches_no_file(
    tmp_path: Path, mini_project: Path, flags: list[str], overrides: list[str]
) -> None:
    out_dir = tmp_path / "out"
    out = run_command(
        "ragsweep", *flags, *user_args(mini_project, out_dir), *overrides, cwd=tmp_path
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert re.search(
        r"\(value '.{4}…'\) looks like a secret \(given on the command line\)", out.stderr
    )
    assert KEY_AS_VALUE[:5] not in out.stdout + out.stderr  # 4 characters at most
    assert not out_dir.exists()
    assert files_containing(tmp_path, KEY_AS_VALUE.encode()) == []


@pytest.mark.parametrize(
    "sweep",
    [
        "axes:\n  - embedding.options.base_url: [a, 'http://x/?k=" + KEY_AS_VALUE + "']\n",
        "baseline:\n  embedding.options.api_key_env: " + KEY_AS_VALUE + "\naxes:\n"
        "  - chunking.size: [100, 120]\n",
    ],
)
def test_a_key_in_a_sweep_file_is_refused_before_anything_is_written(
    tmp_path: Path, mini_project: Path, sweep: str
) -> None:
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    (sweeps / "leak.yaml").write_text(sweep, encoding="utf-8")
    out_dir = tmp_path / "out"
    out = run_command(
        "ragsweep",
        "-m",
        *user_args(mini_project, out_dir),
        f"hydra.sweeper.sweeps_dir={sweeps}",
        "sweep=leak",
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert "(value " in out.stderr and "in the sweep file" in out.stderr
    assert KEY_AS_VALUE[:5] not in out.stdout + out.stderr
    assert not out_dir.exists()  # no run directory, no MLflow store
    assert [
        p for p in files_containing(tmp_path, KEY_AS_VALUE.encode()) if sweeps not in p.parents
    ] == []


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("sk-proj-AbC1dEfGhIjKlMnOpQrStUvWxYz0123", True),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", True),
        ("AKIAABCDEFGHIJKLMNOP", True),
        ("hf_abcdefghijklmnopqrstuvwxyz0123456789", True),
        ("Bearer abcdefghijklmnop1234", True),
        ("OPENAI_API_KEY", False),
        ("/data/sk-learn-experiments-2024-v1", False),
        ("hf_cache_dir", False),
        ("sentence-transformers/all-MiniLM-L6-v2", False),
    ],
)
def test_which_values_look_like_keys(value: str, secret: bool) -> None:
    assert is_secret_value(value) is secret
    assert masked(value).strip("'…") == value[:4]
