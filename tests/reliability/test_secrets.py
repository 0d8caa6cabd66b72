"""A secret passed by mistake never reaches a file or MLflow (issue 12, item 9): it is
refused before Hydra writes the run directory's ``.hydra/`` files."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsweep.core.secret_keys import is_secret_key
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
