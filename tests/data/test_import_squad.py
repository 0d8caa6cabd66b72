from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from ragsweep.cli.importers import main
from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.core.errors import ConfigError, CorpusError, GoldenError
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import load_golden
from ragsweep.data.squad import ImportSummary, import_squad, question_type

REAL_SQUAD = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "data"
    / "squad-v2-dev-cs224n-half"
    / "dev-v2.0.json"
)

# Invented text in SQuAD's structure. Offsets: "the old mill" 14..26, "mill at dawn" 22..34,
# "The mill" 36..44 in MILL_0; the second paragraph of each article starts at len + 2.
MILL_0 = "Ada walked to the old mill at dawn. The mill stood by the river."
MILL_1 = " Two bridges cross the river. "  # leading/trailing spaces must survive
ELM_0 = "The café on Elm Street has a green awning."  # "é" is one code point
ELM_1 = "Nobody knows the tower's builder."


def tiny_squad() -> dict[str, Any]:
    return {
        "version": "v2.0",
        "data": [
            {
                "title": "Mill_Town",
                "paragraphs": [
                    {
                        "context": MILL_0,
                        "qas": [
                            {
                                "id": "q-mill",
                                "question": "Where did Ada walk at dawn?",
                                "answers": [
                                    {"text": "old mill", "answer_start": 18},
                                    {"text": "the old mill", "answer_start": 14},
                                    {"text": "mill at dawn", "answer_start": 22},
                                    {"text": "The mill", "answer_start": 36},
                                ],
                                "is_impossible": False,
                            }
                        ],
                    },
                    {
                        "context": MILL_1,
                        "qas": [
                            {
                                "id": "q-bridges",
                                "question": "How many bridges cross the river?",
                                "answers": [{"text": "Two", "answer_start": 1}],
                                "is_impossible": False,
                            }
                        ],
                    },
                ],
            },
            {
                "title": "Elm_Street",
                "paragraphs": [
                    {
                        "context": ELM_0,
                        "qas": [
                            {
                                "id": "q-awning",
                                "question": "The café's awning has what colour?",
                                "answers": [
                                    {"text": "green", "answer_start": 29},
                                    {"text": "green awning", "answer_start": 29},
                                ],
                                "is_impossible": False,
                            }
                        ],
                    },
                    {
                        "context": ELM_1,
                        "qas": [
                            {
                                "id": "q-tower",
                                "question": "Who built the tower?",
                                "plausible_answers": [{"text": "Nobody", "answer_start": 0}],
                                "answers": [],
                                "is_impossible": True,
                            }
                        ],
                    },
                ],
            },
        ],
    }


EXPECTED_CORPUS = [
    {
        "id": "Mill_Town",
        "title": "Mill Town",
        "text": MILL_0 + "\n\n" + MILL_1,
        "metadata": {"source": "squad", "paragraph_starts": [0, 66]},
    },
    {
        "id": "Elm_Street",
        "title": "Elm Street",
        "text": ELM_0 + "\n\n" + ELM_1,
        "metadata": {"source": "squad", "paragraph_starts": [0, 44]},
    },
]


def expected_golden(spans: dict[str, tuple[str, int, int]]) -> list[dict[str, Any]]:
    def case(case_id: str, question: str, case_type: str) -> dict[str, Any]:
        doc, start, end = spans[case_id]
        return {
            "id": case_id,
            "question": question,
            "type": case_type,
            "answerable": True,
            "evidence": [{"doc": doc, "start": start, "end": end}],
        }

    return [
        case("q-mill", "Where did Ada walk at dawn?", "where"),
        case("q-bridges", "How many bridges cross the river?", "how_many"),
        case("q-awning", "The café's awning has what colour?", "what"),
        {
            "id": "q-tower",
            "question": "Who built the tower?",
            "type": "unanswerable",
            "answerable": False,
            "evidence": [],
        },
    ]


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def squad_file(tmp_path: Path) -> Path:
    return write_json(tmp_path / "tiny.json", tiny_squad())


def test_answer_evidence_merges_overlapping_variants_only(squad_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    import_squad(squad_file, out)

    assert read_jsonl(out / "corpus.jsonl") == EXPECTED_CORPUS
    # q-mill: "old mill" widened by "the old mill" and "mill at dawn", not by "The mill".
    assert read_jsonl(out / "golden.jsonl") == expected_golden(
        {
            "q-mill": ("Mill_Town", 14, 34),
            "q-bridges": ("Mill_Town", 67, 70),
            "q-awning": ("Elm_Street", 29, 41),
        }
    )
    text = EXPECTED_CORPUS[0]["text"]
    assert text[14:34] == "the old mill at dawn"
    assert text[67:70] == "Two"


def test_paragraph_evidence_is_the_whole_paragraph(squad_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    import_squad(squad_file, out, evidence="paragraph")

    assert read_jsonl(out / "golden.jsonl") == expected_golden(
        {
            "q-mill": ("Mill_Town", 0, len(MILL_0)),
            "q-bridges": ("Mill_Town", 66, 66 + len(MILL_1)),
            "q-awning": ("Elm_Street", 0, len(ELM_0)),
        }
    )


def test_summary_counts_and_paths(squad_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir"
    summary = import_squad(squad_file, out)

    assert summary == ImportSummary(
        documents=2,
        paragraphs=4,
        answerable=3,
        unanswerable=1,
        holdout=None,
        corpus_path=out / "corpus.jsonl",
        golden_path=out / "golden.jsonl",
        source_path=out / "SOURCE.md",
    )
    assert summary.cases == 4
    assert sorted(p.name for p in out.iterdir()) == ["SOURCE.md", "corpus.jsonl", "golden.jsonl"]


def test_output_loads_as_a_ragsweep_corpus(squad_file: Path, tmp_path: Path) -> None:
    import_squad(squad_file, tmp_path / "out")

    corpus = load_corpus(CorpusConfig(path=str(tmp_path / "out" / "corpus.jsonl")))

    assert corpus.get("Mill_Town").text == MILL_0 + "\n\n" + MILL_1
    assert corpus.get("Elm_Street").title == "Elm Street"


def test_output_loads_back_through_the_golden_loader(squad_file: Path, tmp_path: Path) -> None:
    import_squad(squad_file, tmp_path / "out", holdout_fraction=0.5)
    out = tmp_path / "out"
    corpus = load_corpus(CorpusConfig(path=str(out / "corpus.jsonl")))
    golden = load_golden(GoldenConfig(path=str(out / "golden.jsonl")), corpus)

    by_id = {case.id: case for case in golden.cases}
    assert set(by_id) == {row["id"] for row in read_jsonl(out / "golden.jsonl")}
    assert sum(c.answerable for c in golden.cases) == 3
    mill = by_id["q-mill"]
    (span,) = mill.evidence
    assert (span.doc, span.start, span.end) == ("Mill_Town", 14, 34)
    assert corpus.get("Mill_Town").text[span.start : span.end] == "the old mill at dawn"
    assert {c.split for c in golden.cases} <= {"tuning", "holdout"}


def test_source_md_records_origin_license_options_and_counts(
    squad_file: Path, tmp_path: Path
) -> None:
    import_squad(squad_file, tmp_path / "out", max_articles=1, holdout_fraction=0.25)

    source_md = (tmp_path / "out" / "SOURCE.md").read_text(encoding="utf-8")
    digest = hashlib.sha256(squad_file.read_bytes()).hexdigest()
    assert str(squad_file.resolve()) in source_md
    assert digest in source_md
    assert "CC BY-SA 4.0" in source_md
    assert "Rajpurkar" in source_md
    assert "evidence: `answer`" in source_md
    assert "articles: first 1" in source_md
    assert "holdout_fraction: 0.25" in source_md
    assert "1 documents" in source_md
    assert "2 cases, 2 answerable and\n  0 unanswerable" in source_md


def test_holdout_fraction_writes_splits_from_the_id_hash(squad_file: Path, tmp_path: Path) -> None:
    summary = import_squad(squad_file, tmp_path / "out", holdout_fraction=0.5)

    cases = read_jsonl(tmp_path / "out" / "golden.jsonl")
    for case in cases:
        position = int(hashlib.sha256(case["id"].encode()).hexdigest()[:16], 16) / 2**64
        assert case["split"] == ("holdout" if position < 0.5 else "tuning")
    assert summary.holdout == sum(case["split"] == "holdout" for case in cases)

    import_squad(squad_file, tmp_path / "none", holdout_fraction=0.0)
    assert {c["split"] for c in read_jsonl(tmp_path / "none" / "golden.jsonl")} == {"tuning"}


def test_max_articles_keeps_the_first_articles(squad_file: Path, tmp_path: Path) -> None:
    summary = import_squad(squad_file, tmp_path / "out", max_articles=1)

    assert read_jsonl(tmp_path / "out" / "corpus.jsonl") == EXPECTED_CORPUS[:1]
    assert [c["id"] for c in read_jsonl(tmp_path / "out" / "golden.jsonl")] == [
        "q-mill",
        "q-bridges",
    ]
    assert (summary.documents, summary.answerable, summary.unanswerable) == (1, 2, 0)


def test_reimport_replaces_outputs_and_leaves_no_temporary_files(
    squad_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    import_squad(squad_file, out)
    import_squad(squad_file, out, max_articles=1)

    assert len(read_jsonl(out / "corpus.jsonl")) == 1
    assert sorted(p.name for p in out.iterdir()) == ["SOURCE.md", "corpus.jsonl", "golden.jsonl"]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Who ruled the duchy?", "who"),
        ("To whom was it given?", "who"),
        ("Whose idea was it?", "who"),
        ("When did it end?", "when"),
        ("Where is it?", "where"),
        ("Which river?", "which"),
        ("Why did they leave?", "why"),
        ("How many people live there?", "how_many"),
        ("HOW  MUCH did it cost?", "how_many"),
        ("How did it start?", "how"),
        ("What's the name?", "what"),
        ("In what year, and where?", "what"),
        ("Where and when did it happen?", "where"),
        ("Somewhat likely, however?", "other"),
        ("Name a river.", "other"),
    ],
)
def test_question_type_is_the_first_wh_word(question: str, expected: str) -> None:
    assert question_type(question) == expected


def break_offset(data: dict[str, Any]) -> dict[str, Any]:
    data["data"][1]["paragraphs"][0]["qas"][0]["answers"][1]["answer_start"] = 30
    return data


def duplicate_id(data: dict[str, Any]) -> dict[str, Any]:
    data["data"][1]["paragraphs"][1]["qas"][0]["id"] = "q-mill"
    return data


def drop_answers(data: dict[str, Any]) -> dict[str, Any]:
    data["data"][0]["paragraphs"][1]["qas"][0]["answers"] = []
    return data


def impossible_with_answer(data: dict[str, Any]) -> dict[str, Any]:
    data["data"][0]["paragraphs"][1]["qas"][0]["is_impossible"] = True
    return data


def duplicate_title(data: dict[str, Any]) -> dict[str, Any]:
    data["data"][1]["title"] = "Mill_Town"
    return data


def drop_context(data: dict[str, Any]) -> dict[str, Any]:
    del data["data"][1]["paragraphs"][1]["context"]
    return data


@pytest.mark.parametrize(
    ("corrupt", "error", "message"),
    [
        (break_offset, GoldenError, r"'q-awning'.*answers\[1\].*'green awning'.*answer_start=30"),
        (duplicate_id, GoldenError, "duplicate question id 'q-mill'"),
        (drop_answers, GoldenError, "'q-bridges'.*without answers"),
        (impossible_with_answer, GoldenError, "'q-bridges'.*is_impossible is true"),
        (duplicate_title, CorpusError, "duplicate title 'Mill_Town'"),
        (
            drop_context,
            CorpusError,
            r"data\[1\] \('Elm_Street'\).paragraphs\[1\]: missing 'context'",
        ),
    ],
)
def test_bad_squad_content_fails_naming_the_place_and_writes_nothing(
    tmp_path: Path, corrupt: Any, error: type[Exception], message: str
) -> None:
    source = write_json(tmp_path / "bad.json", corrupt(copy.deepcopy(tiny_squad())))
    out = tmp_path / "out"

    with pytest.raises(error, match=message):
        import_squad(source, out)
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ('{"version": "v2.0", "data": []}', "not SQuAD JSON"),
        ('[{"title": "x"}]', "not SQuAD JSON"),
        ('{"data": [{"paragraphs": []}]}', r"data\[0\]: missing 'title'"),
        (
            '{"data": [{"title": "x\\ud800", "paragraphs": []}]}',
            r"input\.json: 'data'\[0\]\.'title' holds a lone surrogate \(\\ud800 at character 2\)",
        ),
    ],
)
def test_files_that_are_not_squad_are_rejected(tmp_path: Path, content: str, message: str) -> None:
    source = tmp_path / "input.json"
    source.write_text(content, encoding="utf-8")

    with pytest.raises(CorpusError, match=message):
        import_squad(source, tmp_path / "out")


def test_missing_file_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no such file"):
        import_squad(tmp_path / "absent.json", tmp_path / "out")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"evidence": "sentence"}, "evidence='sentence' is not one of: answer, paragraph"),
        ({"max_articles": 0}, "max_articles=0"),
        ({"holdout_fraction": 1.0}, r"holdout_fraction=1.0 must be in \[0, 1\)"),
        ({"holdout_fraction": -0.1}, "holdout_fraction=-0.1"),
    ],
)
def test_invalid_options_are_config_errors(
    squad_file: Path, tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        import_squad(squad_file, tmp_path / "out", **options)


def test_cli_writes_outputs_and_reports_counts(
    squad_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["squad", str(squad_file), str(out), "--evidence", "paragraph"])

    assert code == 0
    printed = capsys.readouterr().out
    assert "2 documents" in printed
    assert "3 answerable, 1 unanswerable" in printed
    assert read_jsonl(out / "golden.jsonl")[0]["evidence"] == [
        {"doc": "Mill_Town", "start": 0, "end": len(MILL_0)}
    ]


def test_cli_passes_max_articles_and_holdout_fraction(squad_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = main(
        ["squad", str(squad_file), str(out), "--max-articles", "1", "--holdout-fraction", "0.5"]
    )

    assert code == 0
    cases = read_jsonl(out / "golden.jsonl")
    assert [c["id"] for c in cases] == ["q-mill", "q-bridges"]
    assert all(c["split"] in ("tuning", "holdout") for c in cases)


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda tmp: ["squad", str(tmp / "absent.json"), str(tmp / "out")], "no such file"),
        (
            lambda tmp: [
                "squad",
                str(write_json(tmp / "bad.json", break_offset(tiny_squad()))),
                str(tmp / "out"),
            ],
            "'q-awning'",
        ),
        (
            lambda tmp: ["squad", str(write_json(tmp / "list.json", [])), str(tmp / "out")],
            "not SQuAD JSON",
        ),
        (
            lambda tmp: [
                "squad",
                str(write_json(tmp / "ok.json", tiny_squad())),
                str(tmp / "out"),
                "--max-articles",
                "0",
            ],
            "max_articles=0",
        ),
    ],
)
def test_cli_bad_input_exits_2_with_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_args: Any, message: str
) -> None:
    code = main(make_args(tmp_path))

    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ")
    assert message in lines[0]


def test_cli_rejects_unknown_format_and_evidence_mode(squad_file: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as unknown_format:
        main(["squadv3", str(squad_file), str(tmp_path / "out")])
    with pytest.raises(SystemExit) as unknown_mode:
        main(["squad", str(squad_file), str(tmp_path / "out"), "--evidence", "sentence"])

    assert unknown_format.value.code == 2
    assert unknown_mode.value.code == 2


def test_real_squad_dev_half(tmp_path: Path) -> None:
    if not REAL_SQUAD.is_file():
        pytest.skip(f"{REAL_SQUAD} is not available")
    summary = import_squad(REAL_SQUAD, tmp_path / "out")

    assert (summary.documents, summary.answerable, summary.unanswerable) == (16, 2910, 3168)
    texts = {d.id: d.text for d in load_corpus(CorpusConfig(path=str(summary.corpus_path)))}
    cases = read_jsonl(summary.golden_path)
    assert len({c["id"] for c in cases}) == len(cases) == 6078

    first_answers = {
        qa["id"]: qa["answers"][0]["text"]
        for article in json.loads(REAL_SQUAD.read_text(encoding="utf-8"))["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
        if qa["answers"]
    }
    for case in cases:
        assert case["answerable"] == (case["id"] in first_answers)
        assert len(case["evidence"]) == (1 if case["answerable"] else 0)
        for span in case["evidence"]:
            assert first_answers[case["id"]] in texts[span["doc"]][span["start"] : span["end"]]
