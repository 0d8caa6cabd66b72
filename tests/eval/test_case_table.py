"""Per-case results a reader can judge: ``cases.jsonl`` fields, the MLflow table
``cases_table.json``, ``chunks.jsonl`` bounded by what was retrieved, and what is uploaded
(each per-case value once: the table, and ``cases.jsonl.gz`` with the rest of each row;
``chunks.jsonl`` stays local) within a bounded number of bytes per case, and read back.

The runs are real: Hydra composition, the demo-sized mini project, a real SQLite store, and
``ragsweep`` itself in a subprocess where the command line matters (Hydra's ``cli.log``,
whether MLflow is imported)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from ragsweep.config.app import plain_config
from ragsweep.core import tags as tag
from ragsweep.core.names import CASES_FILE, CHUNKS_FILE
from ragsweep.data.corpus import Corpus, Document
from ragsweep.data.golden import EvidenceSpan, GoldenCase
from ragsweep.data.squad import import_squad
from ragsweep.eval.case_table import (
    EVIDENCE_CHARS,
    QUESTION_CHARS,
    ROW_CHAR_BOUND,
    SHOWN_FIELDS,
    TABLE_EXCERPT_CHARS,
    TableLayout,
    case_fields,
    excerpt,
    first_hit_rank,
    rebuilt_case_row,
    stored_case_row,
)
from ragsweep.eval.scoring import CaseResult, RetrievedChunk, cases_from_jsonl
from ragsweep.release.store import RunStore
from ragsweep.run.config import resolve
from ragsweep.run.pipeline import run_evaluation
from ragsweep.sweep.paired import CaseValues, read_case_values
from ragsweep.tracking.artifacts import artifact_text
from tests.conftest import HANDBOOK, SQUAD_FILE

BIN = Path(sys.executable).parent
DOCUMENTED_COLUMNS = [  # docs/formats.md, "cases_table.json"
    "question",
    "type",
    "answerable",
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
    "top_chunk",
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
    assert len(table["data"]) == len(cases)  # one row per case, in cases.jsonl order
    chunk_text = {c["chunk_id"]: c["text"] for c in rows(out / "chunks.jsonl")}
    for case, cells in zip(cases, table["data"], strict=True):
        row = dict(zip(table["columns"], cells, strict=True))
        assert row["question"] == case["question"]
        assert (row["type"], row["answerable"]) == (case["type"], case["answerable"])
        assert row["first_hit_rank"] == case["first_hit_rank"]
        for k in (1, 3, 5, 10):  # 0 for an unanswerable case: it has nothing to hit
            assert row[f"hit_at_{k}"] == int((case["metrics"] or {}).get(f"hit_at_{k}", 0))
        retrieved = case["retrieved"]
        if not retrieved["chunk_id"]:  # a case whose scope matched no chunk
            assert row["top_chunk"] is row["top_score"] is row["top_excerpt"] is None
            continue
        top = f"{retrieved['doc'][0]}@{retrieved['start'][0]}-{retrieved['end'][0]}"
        assert row["top_chunk"] == top == retrieved["chunk_id"][0]
        assert row["top_score"] == round(retrieved["score"][0], 3)
        assert row["top_excerpt"] == excerpt(chunk_text[top], TABLE_EXCERPT_CHARS)
    first = dict(zip(table["columns"], table["data"][0], strict=True))
    assert first["evidence"] == "billing.md@" + "-".join(
        str(by_id["q1"]["evidence"][0][k]) for k in ("start", "end")
    )
    assert first["evidence_text"] == "Refunds are issued within 14 days"

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
    assert list(loaded["question"]) == [c["question"] for c in cases]


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
    from ragsweep.chunk.chunkers import chunk_corpus
    from ragsweep.data.corpus import load_corpus

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


def test_the_command_stores_each_case_once_and_no_empty_log_or_record(
    tmp_path: Path, mini_project: Path
):
    out = ragsweep(tmp_path, f"paths.output_dir={tmp_path / 'out'}", *project(mini_project))
    assert out.returncode == 0, out.stderr[-3000:]
    (run_dir,) = (tmp_path / "out" / "runs").glob("*/*")
    assert (run_dir / "cli.log").stat().st_size == 0  # Hydra's log: nothing was logged
    assert (run_dir / "record.json").is_file()  # kept for ragsweep-log
    assert (run_dir / CHUNKS_FILE).is_file()  # the chunk texts stay in the run directory

    uri = f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("ragsweep").experiment_id])
    run_id = run.info.run_id
    uploaded = {a.path for a in client.list_artifacts(run_id)}
    assert {"cases.jsonl.gz", "cases_table.json", "config.yaml"} <= uploaded
    assert not {"cases.jsonl", "chunks.jsonl", "chunks.jsonl.gz"} & uploaded
    assert "cli.log" not in uploaded and "record.json" not in uploaded

    # The store keeps of each cases.jsonl row only what the table does not show ...
    stored = Path(client.download_artifacts(run_id, "", str(tmp_path / "stored")))
    compressed = (stored / "cases.jsonl.gz").read_bytes()
    assert compressed[:2] == b"\x1f\x8b"  # the gzip magic number
    stored_rows = [json.loads(line) for line in gzip.decompress(compressed).splitlines()]
    local_rows = rows(run_dir / CASES_FILE)
    for kept, whole in zip(stored_rows, local_rows, strict=True):
        assert not SHOWN_FIELDS & set(kept)
        assert kept == {k: v for k, v in whole.items() if k not in SHOWN_FIELDS}
    # ... and every reader gets the cases back, the ranking cut to its first chunk.
    from_run_dir = cases_from_jsonl((run_dir / CASES_FILE).read_text(), "run directory")
    logged = RunStore(uri).cases(run_id)
    assert [c.id for c in logged] == [c.id for c in from_run_dir]
    for back, local in zip(logged, from_run_dir, strict=True):
        assert (back.type, back.split, back.answerable) == (
            local.type,
            local.split,
            local.answerable,
        )
        assert back.metrics == local.metrics and back.seconds == local.seconds
        first = [c._replace(score=round(c.score, 3)) for c in local.retrieved[:1]]
        assert list(back.retrieved) == first
    values = read_case_values("recall_at_5", None, run_id, client)
    assert isinstance(values, CaseValues)
    assert values == CaseValues.from_cases(from_run_dir, "recall_at_5", "run directory")


def test_readers_fall_back_to_the_files_of_runs_logged_before(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("old", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(experiment).info.run_id
    client.log_text(run_id, '{"chunk_id": "a"}\n', CHUNKS_FILE)  # as runs were stored before
    assert artifact_text(client, run_id, CHUNKS_FILE) == '{"chunk_id": "a"}\n'
    with pytest.raises(FileNotFoundError, match=r"'cases.jsonl.gz' or 'cases.jsonl'"):
        artifact_text(client, run_id, CASES_FILE)
    whole = {  # a whole row, as runs logged before the table held the shown fields
        "id": "q1",
        "type": "factual",
        "split": "tuning",
        "answerable": True,
        "metrics": {"recall_at_5": 1.0},
        "latency_ms": 1.5,
        "retrieved": {
            "chunk_id": ["a@0-9", "a@9-20"],
            "doc": ["a", "a"],
            "start": [0, 9],
            "end": [9, 20],
            "score": [2.0, 1.0],
        },
    }
    (tmp_path / "cases.jsonl.gz").write_bytes(gzip.compress(json.dumps(whole).encode() + b"\n"))
    client.log_artifact(run_id, str(tmp_path / "cases.jsonl.gz"))
    (case,) = RunStore(uri).cases(run_id)
    assert len(case.retrieved) == 2 and case.metrics == {"recall_at_5": 1.0}
    (tmp_path / "cases.jsonl.gz").write_bytes(b"not gzip")
    client.log_artifact(run_id, str(tmp_path / "cases.jsonl.gz"))
    with pytest.raises(OSError, match="not a readable gzip file"):
        artifact_text(client, run_id, CASES_FILE)


def test_a_stored_row_without_its_table_is_an_error_naming_the_table(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("lost", artifact_location=str(tmp_path / "art"))
    run_id = client.create_run(experiment).info.run_id
    row = {"id": "q1", "split": "tuning", "metrics": None, "latency_ms": 1.0}
    (tmp_path / "cases.jsonl.gz").write_bytes(gzip.compress(json.dumps(row).encode() + b"\n"))
    client.log_artifact(run_id, str(tmp_path / "cases.jsonl.gz"))
    with pytest.raises(FileNotFoundError, match=r"cases_table\.json"):
        artifact_text(client, run_id, CASES_FILE)
    client.log_text(run_id, '{"columns": ["type"], "data": []}', "cases_table.json")
    with pytest.raises(OSError, match=r"cases_table.json of run .* does not match"):
        artifact_text(client, run_id, CASES_FILE)


def test_a_table_row_is_bounded_whatever_the_texts() -> None:
    """Every cell is cut or rounded: a row of the longest texts, most spans, largest
    offsets and ten cut-offs stays within ROW_CHAR_BOUND characters beside its ids."""
    doc = "d"
    spans = [EvidenceSpan(doc, 10**6 + 600 * i, 10**6 + 600 * i + 500) for i in range(7)]
    case = GoldenCase("x" * 40, "q " * 900, "t", True, "tuning", tuple(spans), None, 1)
    corpus = Corpus((Document(doc, "word " * 300_000),), "test")
    top = RetrievedChunk(f"{doc}@0-1", doc, 10**9, 10**9 + 800, -123456.123456789)
    ks = (1, 2, 3, 5, 10, 20, 50)
    budgets = (1000, 2000, 4000)
    metrics = {f"hit_at_{k}": 1.0 for k in ks} | {f"hit_at_{b}c": 1.0 for b in budgets}
    result = CaseResult(case.id, "t", "tuning", True, {**metrics, "mrr": 1 / 12}, (top,), 0.1)
    fields = case_fields(case, result, corpus, "long text " * 1000)
    row = TableLayout(ks, budgets).row(fields, result)
    encoded = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    ids = encoded.count(doc + "@") * len(doc) + len(case.type)
    assert len(encoded) - ids <= ROW_CHAR_BOUND
    assert len(row[0]) == QUESTION_CHARS and "+5 more" in row[3]


def test_a_top_chunk_whose_id_is_not_its_location_keeps_its_id() -> None:
    """An external index names its chunks itself: the stored row keeps that id, which the
    table's location (``doc@start-end``) would not give back."""
    top = RetrievedChunk("ext-17", "d@v2", 5, 40, 1.23456)
    second = RetrievedChunk("ext-18", "d@v2", 40, 90, 1.0)
    result = CaseResult(
        "q1", "t", "tuning", True, {"hit_at_1": 1.0, "mrr": 1.0}, (top, second), 0.002
    )
    case = GoldenCase("q1", "Where?", "t", True, "tuning", (EvidenceSpan("d@v2", 6, 9),), None, 1)
    corpus = Corpus((Document("d@v2", "x" * 100),), "test")
    fields = case_fields(case, result, corpus, "the top text")
    layout = TableLayout((1,), ())
    row = {**result.to_json(), **fields}
    stored = stored_case_row(row)
    assert stored == {
        "id": "q1",
        "split": "tuning",
        "origin": "hand",
        "metrics": {"hit_at_1": 1.0, "mrr": 1.0},
        "latency_ms": 2.0,
        "top_chunk_id": "ext-17",
    }
    table_row = dict(zip(layout.columns, layout.row(fields, result), strict=True))
    assert table_row["top_chunk"] == "d@v2@5-40"
    back = CaseResult.from_json(rebuilt_case_row(stored, table_row))
    assert back == replace(result, retrieved=(top._replace(score=1.235),))


@pytest.mark.slow
def test_a_squad_run_uploads_at_most_a_megabyte(tmp_path: Path) -> None:
    """The artifact budget (docs/tracking.md): one SQuAD run, default config, tuning split,
    within 1,000,000 bytes, because each case adds a bounded table row and one compressed
    line of metrics, and nothing grows with the corpus, the chunk size or the ranking."""
    if not SQUAD_FILE.is_file():
        pytest.skip(f"{SQUAD_FILE} is not available")
    data = tmp_path / "squad"
    import_squad(SQUAD_FILE, data)
    out = ragsweep(
        tmp_path,
        f"paths.output_dir={tmp_path / 'out'}",
        "corpus=squad",
        "golden=squad",
        f"corpus.path={data / 'corpus.jsonl'}",
        f"golden.path={data / 'golden.jsonl'}",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    (root,) = (tmp_path / "out" / "mlartifacts").glob("*/artifacts")
    sizes = {
        p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()
    }
    (run_dir,) = (tmp_path / "out" / "runs").glob("*/*")
    n_cases = len(rows(run_dir / CASES_FILE))
    assert n_cases > 4000
    per_case = sizes["cases_table.json"] + sizes["cases.jsonl.gz"]
    assert per_case <= n_cases * PER_CASE_BYTES, sizes
    assert sum(sizes.values()) - per_case <= PER_RUN_BYTES, sizes
    assert sum(sizes.values()) <= 1_000_000, sizes


PER_CASE_BYTES = 240
"""docs/tracking.md, "Artifact budget": a SQuAD case averages 224 bytes (its table row 197,
its compressed line with span traces 27)."""
PER_RUN_BYTES = 75_000
"""The files that grow with the question types and measures, not the cases (69 kB on SQuAD)."""


NO_MLFLOW = """
import sys
from ragsweep.cli.main import main
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


def test_case_texts_holding_unicode_line_separators_are_logged_and_read_back(
    tmp_path: Path, mini_project: Path
):
    """JSON keeps U+2028, U+2029 and U+0085 raw inside strings; the stored cases must not
    be cut there (str.splitlines would)."""
    golden = mini_project / "golden.jsonl"
    cases = rows(golden)
    cases[0]["question"] = "How long\u2028do refunds\u2029take?\u0085"
    golden.write_text(
        "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8"
    )
    out = ragsweep(tmp_path, f"paths.output_dir={tmp_path / 'out'}", *project(mini_project))
    assert out.returncode == 0, out.stderr[-3000:]
    (run_dir,) = (tmp_path / "out" / "runs").glob("*/*")
    uri = f"sqlite:///{tmp_path / 'out' / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("ragsweep").experiment_id])
    assert run.data.tags[tag.LOGGED] == "complete"
    local = cases_from_jsonl((run_dir / CASES_FILE).read_text(encoding="utf-8"), "run dir")
    logged = RunStore(uri).cases(run.info.run_id)
    assert [c.id for c in logged] == [c.id for c in local] and local[0].id == "q1"
    raw = (run_dir / CASES_FILE).read_text(encoding="utf-8")
    assert "How long\u2028do refunds\u2029take?\u0085" in raw  # kept raw, not escaped
    text = artifact_text(client, run.info.run_id, CASES_FILE)
    assert len(cases_from_jsonl(text, "store")) == len(local)
