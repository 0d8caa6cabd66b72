"""Per-case results a reader can judge: ``cases.jsonl`` fields, the MLflow table
``cases_table.json``, ``chunks.jsonl`` bounded by what was retrieved, and what is uploaded
(the two JSONL files gzip-compressed) and read back.

The runs are real: Hydra composition, the demo-sized mini project, a real SQLite store, and
``ragsweep`` itself in a subprocess where the command line matters (Hydra's ``cli.log``,
whether MLflow is imported)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragsweep import tags as tag
from ragsweep.appconfig import plain_config
from ragsweep.artifact_store import CASES_FILE, CHUNKS_FILE, artifact_text
from ragsweep.case_table import EVIDENCE_CHARS, EXCERPT_CHARS, excerpt, first_hit_rank
from ragsweep.evaluate import cases_from_jsonl
from ragsweep.pipeline import run_evaluation
from ragsweep.release.store import RunStore
from ragsweep.run_config import resolve
from ragsweep.sweep.paired import CaseValues, read_case_values
from tests.conftest import HANDBOOK

BIN = Path(sys.executable).parent
DOCUMENTED_COLUMNS = [  # docs/formats.md, "cases_table.json"
    "id",
    "type",
    "answerable",
    "question",
    "evidence",
    "evidence_text",
    "first_hit_rank",
    "hit_at_1",
    "hit_at_3",
    "hit_at_5",
    "hit_at_10",
    "hit_at_1000c",
    "hit_at_2000c",
    "hit_at_4000c",
    "top_doc",
    "top_start",
    "top_end",
    "top_score",
    "top_excerpt",
]


def project(root: Path, *extra: str) -> list[str]:
    return [
        f"corpus.path={root / 'corpus'}",
        f"golden.path={root / 'golden.jsonl'}",
        "chunking.size=60",
        "chunking.overlap=0",
        *extra,
    ]


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_run_logs_its_cases_as_an_mlflow_table(
    compose_config, mini_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolved = plain_config(compose_config(*project(mini_project)))
    result = run_evaluation(resolve(resolved), mini_project / "run")
    out = result.output_dir

    cases = rows(out / "cases.jsonl")
    by_id = {c["id"]: c for c in cases}
    refunds = by_id["q1"]
    assert refunds["question"] == "How long do refunds take?"
    (evidence,) = refunds["evidence"]
    assert evidence["doc"] == "billing.md"
    assert evidence["text"] == "Refunds are issued within 14 days"
    assert HANDBOOK[evidence["start"] : evidence["end"]] == evidence["text"]
    for case in cases:  # the first hit agrees with the case's hits at each k
        rank = case["first_hit_rank"]
        metrics = case["metrics"]
        if metrics is None:
            assert rank is None and case["evidence"] == []
            continue
        for k in (1, 3, 5, 10):
            assert metrics[f"hit_at_{k}"] == float(rank is not None and rank <= k)
    assert by_id["q4"]["top_excerpt"]  # unanswerable cases show what came first too

    table = json.loads((out / "cases_table.json").read_text(encoding="utf-8"))
    assert table["columns"] == DOCUMENTED_COLUMNS
    assert [row[0] for row in table["data"]] == [c["id"] for c in cases]  # one row per case
    first = dict(zip(table["columns"], table["data"][0], strict=True))
    retrieved = by_id[first["id"]]["retrieved"]
    assert (first["top_doc"], first["top_start"], first["top_end"]) == (
        retrieved["doc"][0],
        retrieved["start"][0],
        retrieved["end"][0],
    )
    chunk_text = {c["chunk_id"]: c["text"] for c in rows(out / "chunks.jsonl")}
    assert first["top_excerpt"] == excerpt(chunk_text[retrieved["chunk_id"][0]], EXCERPT_CHARS)

    uri = "sqlite:///" + resolved["tracking"]["default_db"]
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(result.run_id)
    logged_tables = json.loads(run.data.tags[tag.LOGGED_ARTIFACTS])
    assert {"path": "cases_table.json", "type": "table"} in logged_tables
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)  # load_table searches the global store
    loaded = client.load_table(  # MLflow's own reader of logged tables
        run.info.experiment_id, "cases_table.json", run_ids=[result.run_id]
    )
    assert list(loaded.columns) == DOCUMENTED_COLUMNS
    assert list(loaded["id"]) == [c["id"] for c in cases]


def test_chunks_file_is_bounded_by_cases_times_depth(compose_config, mini_project: Path) -> None:
    shallow = (
        "chunking.size=30",
        "retrieval.top_k=1",
        "eval.ks=[1]",
        "eval.budgets=[]",
        "eval.objective=recall_at_1",
    )
    cfg = compose_config(*project(mini_project, *shallow, "tracking=off"))
    result = run_evaluation(resolve(plain_config(cfg)), mini_project / "run")

    chunks = rows(result.output_dir / "chunks.jsonl")
    retrieved = {r.chunk_id for case in result.cases for r in case.retrieved}
    assert {c["chunk_id"] for c in chunks} == retrieved
    depth = 1  # retrieval.top_k
    corpus_chunks = _corpus_chunks(compose_config, mini_project, *shallow)
    assert len(chunks) <= len(result.cases) * depth < corpus_chunks
    documents = {"billing.md": HANDBOOK}
    for chunk in chunks:
        if chunk["doc"] in documents:
            assert documents[chunk["doc"]][chunk["start"] : chunk["end"]] == chunk["text"]


def _corpus_chunks(compose_config, root: Path, *overrides: str) -> int:
    """How many chunks the run's chunking cuts from the mini corpus."""
    from ragsweep.chunking import chunk_corpus
    from ragsweep.corpus import load_corpus

    resolved = resolve(plain_config(compose_config(*project(root, *overrides))))
    return len(chunk_corpus(load_corpus(resolved.cfg.corpus), resolved.cfg.chunking))


def test_texts_are_cut_to_a_fixed_length() -> None:
    assert excerpt("a  b\n\nc", 10) == "a b c"
    cut = excerpt("x" * 500, EVIDENCE_CHARS)
    assert len(cut) == EVIDENCE_CHARS and cut.endswith("…")
    assert first_hit_rank({"mrr": 1 / 3}) == 3
    assert first_hit_rank({"mrr": 0.0}) is None
    assert first_hit_rank(None) is None


def ragsweep(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ragsweep"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "MLFLOW_TRACKING_URI": ""},
        timeout=300,
    )


def test_the_command_uploads_jsonl_compressed_and_no_empty_log_or_record(
    tmp_path: Path, mini_project: Path
):
    out = ragsweep(tmp_path, f"paths.output_dir={tmp_path / 'out'}", *project(mini_project))
    assert out.returncode == 0, out.stderr[-3000:]
    (run_dir,) = (tmp_path / "out" / "runs").glob("*/*")
    assert (run_dir / "cli.log").stat().st_size == 0  # Hydra's log: nothing was logged
    assert (run_dir / "record.json").is_file()  # kept for ragsweep-log

    uri = f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("ragsweep").experiment_id])
    run_id = run.info.run_id
    uploaded = {a.path for a in client.list_artifacts(run_id)}
    assert {"cases.jsonl.gz", "cases_table.json", "chunks.jsonl.gz", "config.yaml"} <= uploaded
    assert "cases.jsonl" not in uploaded and "chunks.jsonl" not in uploaded
    assert "cli.log" not in uploaded and "record.json" not in uploaded

    # The store holds the run directory's files, the two large ones gzip-compressed ...
    stored = Path(client.download_artifacts(run_id, "", str(tmp_path / "stored")))
    for name in (CASES_FILE, CHUNKS_FILE):
        compressed = (stored / f"{name}.gz").read_bytes()
        assert compressed[:2] == b"\x1f\x8b"  # the gzip magic number
        assert gzip.decompress(compressed) == (run_dir / name).read_bytes(), name
        assert len(compressed) < (run_dir / name).stat().st_size
    # ... and every reader gets the plain text back.
    assert artifact_text(client, run_id, CHUNKS_FILE) == (run_dir / CHUNKS_FILE).read_text()
    from_run_dir = cases_from_jsonl((run_dir / CASES_FILE).read_text(), "run directory")
    assert RunStore(uri).cases(run_id) == from_run_dir
    values = read_case_values("recall_at_5", None, run_id, client)
    assert isinstance(values, CaseValues)
    assert values == CaseValues.from_cases(from_run_dir, "recall_at_5", "run directory")


def test_readers_fall_back_to_the_plain_file_of_runs_logged_before(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("old", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(experiment).info.run_id
    client.log_text(run_id, '{"chunk_id": "a"}\n', CHUNKS_FILE)  # as runs were stored before
    assert artifact_text(client, run_id, CHUNKS_FILE) == '{"chunk_id": "a"}\n'
    with pytest.raises(FileNotFoundError, match=r"'cases.jsonl.gz' or 'cases.jsonl'"):
        artifact_text(client, run_id, CASES_FILE)
    (tmp_path / "cases.jsonl.gz").write_bytes(b"not gzip")
    client.log_artifact(run_id, str(tmp_path / "cases.jsonl.gz"))
    with pytest.raises(OSError, match="not a readable gzip file"):
        artifact_text(client, run_id, CASES_FILE)


NO_MLFLOW = """
import sys
from ragsweep.cli import main
sys.argv = ["ragsweep", *sys.argv[1:]]
try:
    main()
finally:
    loaded = sorted(m for m in sys.modules if m == "mlflow" or m.startswith("mlflow."))
    print("mlflow modules:", loaded, file=sys.stderr)
"""


def test_a_run_with_tracking_off_never_imports_mlflow(tmp_path: Path, mini_project: Path):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            NO_MLFLOW,
            f"paths.output_dir={tmp_path / 'out'}",
            "tracking=off",
            *project(mini_project),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": ""},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert list((tmp_path / "out" / "runs").glob("*/*/cases_table.json"))  # it did run
    assert "mlflow modules: []" in done.stderr
    assert not (tmp_path / "out" / "mlflow.db").exists()
