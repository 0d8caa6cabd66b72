"""Golden set loading: fields, evidence forms, quote resolution, scope, splits, errors."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragsweep.config.schema import CorpusConfig, GoldenConfig
from ragsweep.core.errors import GoldenError
from ragsweep.data.corpus import Corpus, load_corpus
from ragsweep.data.golden import EvidenceSpan, GoldenSet, load_golden
from ragsweep.data.quotes import resolve_quote
from ragsweep.data.splits import assign_split

SRC_DIR = Path(__file__).resolve().parents[2] / "src"

P1 = (
    "# SLA\n\nUptime is 99.9% per month.\nPlanned maintenance is excluded from the uptime.\n"
    "Contact support when the uptime target is missed.\n"
)
VPN = "# VPN\n\nＶＰＮ接続には ｶﾞｲﾄﾞ を参照。\nThe VPN client\n   restarts nightly.\n"


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    root = tmp_path / "corpus"
    for name, text in {"support/p1.md": P1, "support/vpn.md": VPN, "faq.txt": "No answer."}.items():
        file = root / name
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
    return load_corpus(CorpusConfig(path=str(root)))


def write_golden(tmp_path: Path, *lines: dict[str, Any] | str) -> Path:
    """Write a golden file; dicts become JSON lines, strings are written verbatim."""
    path = tmp_path / "golden.jsonl"
    body = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(body + "\n", encoding="utf-8")
    return path


def load(tmp_path: Path, corpus: Corpus, *lines: dict[str, Any] | str) -> GoldenSet:
    return load_golden(GoldenConfig(path=str(write_golden(tmp_path, *lines))), corpus)


def case(**fields: Any) -> dict[str, Any]:
    """A valid answerable case, with ``fields`` overriding or adding keys."""
    record: dict[str, Any] = {
        "id": "q-001",
        "question": "Is planned maintenance counted?",
        "evidence": [{"doc": "support/p1.md", "quote": "Planned maintenance is excluded"}],
    }
    record.update(fields)
    return record


def load_error(tmp_path: Path, corpus: Corpus, *lines: dict[str, Any] | str) -> str:
    with pytest.raises(GoldenError) as info:
        load(tmp_path, corpus, *lines)
    return str(info.value)


# --- resolve_quote ----------------------------------------------------------------------


def test_exact_quote_returns_its_offsets() -> None:
    start, end = resolve_quote(P1, "Planned maintenance is excluded")
    assert (start, end) == (P1.index("Planned"), P1.index(" from the uptime"))
    assert P1[start:end] == "Planned maintenance is excluded"


def test_exact_match_wins_over_tolerant_matches() -> None:
    text = "ＶＰＮ first, then VPN"
    start, end = resolve_quote(text, "VPN")
    assert text[start:end] == "VPN"
    assert start == text.rindex("VPN")


@pytest.mark.parametrize(
    ("text", "quote", "expected"),
    [
        ("Connect to the ＶＰＮ now.", "VPN now", "ＶＰＮ now"),
        ("Connect to the VPN now.", "ＶＰＮ", "VPN"),
        ("Read the ｶﾞｲﾄﾞ first.", "ガイド", "ｶﾞｲﾄﾞ"),
        ("Read the ガイド first.", "ｶﾞｲﾄﾞ", "ガイド"),
        ("Order a Cafe\u0301 au lait", "Café au", "Cafe\u0301 au"),
        ("Founded in ㍻元年.", "平成元年", "㍻元年"),
        ("Founded in ㍻元年.", "成元", "㍻元"),
    ],
)
def test_tolerant_quote_ignores_unicode_compatibility_differences(
    text: str, quote: str, expected: str
) -> None:
    start, end = resolve_quote(text, quote)
    assert text[start:end] == expected


@pytest.mark.parametrize(
    ("quote", "expected"),
    [
        ("Planned maintenance is excluded", "Planned\n   maintenance  is\texcluded"),
        ("Planned   maintenance\nis excluded", "Planned\n   maintenance  is\texcluded"),
        ("  \n maintenance is excluded \n", "maintenance  is\texcluded"),
        ("excluded from　the uptime", "excluded\n\nfrom the uptime"),  # ideographic space
    ],
)
def test_tolerant_quote_ignores_whitespace_differences(quote: str, expected: str) -> None:
    text = "Note: Planned\n   maintenance  is\texcluded\n\nfrom the uptime."
    start, end = resolve_quote(text, quote)
    assert text[start:end] == expected


def test_tolerant_match_maps_back_to_offsets_after_expanding_characters() -> None:
    text = "㍻ ＶＰＮ\u3000 guide ｶﾞｲﾄﾞ here"
    start, end = resolve_quote(text, "VPN guide ガイド")
    assert text[start:end] == "ＶＰＮ\u3000 guide ｶﾞｲﾄﾞ"
    assert (start, end) == (2, 2 + len("ＶＰＮ\u3000 guide ｶﾞｲﾄﾞ"))


def test_ambiguous_quote_without_occurrence_lists_matches() -> None:
    text = "reset the token. Then reset the token again."
    with pytest.raises(ValueError, match="occurs 2 times") as info:
        resolve_quote(text, "reset the token")
    assert "0-15" in str(info.value)
    assert "22-37" in str(info.value)
    assert '"occurrence"' in str(info.value)


def test_ambiguous_quote_lists_only_the_first_few_offsets() -> None:
    with pytest.raises(ValueError, match="occurs 6 times") as info:
        resolve_quote("ab ab ab ab ab ab", "ab")
    assert "0-2, 3-5, 6-8, …" in str(info.value)
    assert "15-17" not in str(info.value)


def test_occurrence_picks_the_nth_non_overlapping_match() -> None:
    text = "reset the token. Then reset the token again."
    assert resolve_quote(text, "reset the token", occurrence=1) == (0, 15)
    assert resolve_quote(text, "reset the token", occurrence=2) == (22, 37)
    assert resolve_quote("aaaa", "aa", occurrence=2) == (2, 4)


def test_occurrence_applies_to_tolerant_matches() -> None:
    text = "ＶＰＮ down.\nVPN  down."
    with pytest.raises(ValueError, match="occurs 2 times"):
        resolve_quote(text, "VPN down")
    start, end = resolve_quote(text, "VPN down", occurrence=2)
    assert text[start:end] == "VPN  down"


def test_occurrence_beyond_count_is_an_error() -> None:
    with pytest.raises(ValueError, match="occurrence=3 but quote 'token' occurs only 2"):
        resolve_quote("token token", "token", occurrence=3)


def test_occurrence_below_one_is_an_error() -> None:
    with pytest.raises(ValueError, match="occurrence=0 must be >= 1"):
        resolve_quote("token", "token", occurrence=0)


def test_quote_not_found_shows_a_truncated_quote() -> None:
    quote = "This sentence is not in the document and it is long enough to be cut short"
    with pytest.raises(ValueError, match="not found") as info:
        resolve_quote(P1, quote)
    message = str(info.value)
    assert quote[:40] in message
    assert quote not in message
    assert "…" in message


@pytest.mark.parametrize("quote", ["", "   \n"])
def test_empty_quote_is_an_error(quote: str) -> None:
    with pytest.raises(ValueError, match="quote is empty"):
        resolve_quote(P1, quote)


# --- assign_split -----------------------------------------------------------------------


def test_assign_split_follows_the_documented_hash_rule() -> None:
    for case_id in ("q-001", "q-002", "ünïcode-id", "x"):
        position = int(hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:16], 16) / 2**64
        expected = "holdout" if position < 0.5 else "tuning"
        assert assign_split(case_id, 0.5) == expected


def test_assign_split_is_the_same_in_another_process() -> None:
    ids = [f"q-{i:03d}" for i in range(50)]
    here = [assign_split(case_id, 1 / 3) for case_id in ids]
    code = (
        "import json, sys; from ragsweep.data.splits import assign_split; "
        "print(json.dumps([assign_split(i, 1 / 3) for i in json.loads(sys.argv[1])]))"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC_DIR), "PYTHONHASHSEED": "12345"}
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(ids)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert json.loads(result.stdout) == here
    assert set(here) == {"tuning", "holdout"}


@pytest.mark.parametrize("fraction", [0.2, 1 / 3, 0.5])
def test_assign_split_holds_out_roughly_the_requested_fraction(fraction: float) -> None:
    splits = [assign_split(f"case-{i}", fraction) for i in range(3000)]
    observed = splits.count("holdout") / len(splits)
    assert abs(observed - fraction) < 0.04  # > 4 standard deviations for 3000 draws


def test_assign_split_with_zero_fraction_keeps_everything_for_tuning() -> None:
    assert {assign_split(f"case-{i}", 0.0) for i in range(200)} == {"tuning"}


# --- data classes -----------------------------------------------------------------------


def test_evidence_span_length_and_validation() -> None:
    assert EvidenceSpan("d", 3, 10).length == 7
    with pytest.raises(ValueError):
        EvidenceSpan("d", 5, 5)
    with pytest.raises(ValueError):
        EvidenceSpan("d", -1, 5)


# --- load_golden: valid files -----------------------------------------------------------


def test_load_valid_golden_set(tmp_path: Path, corpus: Corpus) -> None:
    golden = load(
        tmp_path,
        corpus,
        case(
            type="factual",
            split="holdout",
            notes="free text",
            metadata={"author": "kim"},
            evidence=[
                {"doc": "support/p1.md", "quote": "Planned maintenance is excluded"},
                {"doc": "support/p1.md", "start": 8, "end": 33},
            ],
        ),
        "",
        case(
            id="q-002",
            question="Is there a VPN guide?",
            evidence=[
                {"doc": "support/vpn.md", "quote": "ガイド"},
            ],
        ),
        case(id="q-003", question="What is the refund policy?", answerable=False, evidence=[]),
        "   ",
        case(id="q-004", type="factual", split="tuning", scope=["support/p1.md"]),
    )
    q1, q2, q3, q4 = golden.cases
    start = P1.index("Planned")
    assert q1.evidence == (
        EvidenceSpan("support/p1.md", start, start + len("Planned maintenance is excluded")),
        EvidenceSpan("support/p1.md", 8, 33),
    )
    assert (q1.id, q1.type, q1.split, q1.answerable, q1.scope, q1.line) == (
        "q-001",
        "factual",
        "holdout",
        True,
        None,
        1,
    )
    assert (q2.type, q2.split, q2.line) == ("untyped", assign_split("q-002", 1 / 3), 3)
    span = q2.evidence[0]
    assert corpus.get(span.doc).text[span.start : span.end] == "ｶﾞｲﾄﾞ"
    assert (q3.answerable, q3.evidence, q3.line) == (False, (), 4)
    assert (q4.scope, q4.line) == (("support/p1.md",), 6)
    assert golden.types == ("factual", "untyped")
    assert golden.for_split("holdout")[0] is q1
    assert q4 in golden.for_split("tuning")
    assert len(golden.for_split("tuning")) + len(golden.for_split("holdout")) == 4


def test_golden_set_records_path_and_digest_of_the_file_bytes(
    tmp_path: Path, corpus: Corpus
) -> None:
    path = write_golden(tmp_path, case())
    golden = load_golden(GoldenConfig(path=str(path)), corpus)
    assert golden.path == str(path)
    assert golden.digest == hashlib.sha256(path.read_bytes()).hexdigest()


def test_missing_split_uses_the_configured_holdout_fraction(tmp_path: Path, corpus: Corpus) -> None:
    path = write_golden(tmp_path, *(case(id=f"q-{i}") for i in range(20)))
    all_tuning = load_golden(GoldenConfig(path=str(path), holdout_fraction=0.0), corpus)
    assert {c.split for c in all_tuning.cases} == {"tuning"}
    half = load_golden(GoldenConfig(path=str(path), holdout_fraction=0.5), corpus)
    assert [c.split for c in half.cases] == [assign_split(f"q-{i}", 0.5) for i in range(20)]


def test_for_split_rejects_unknown_split_names(tmp_path: Path, corpus: Corpus) -> None:
    with pytest.raises(ValueError, match="unknown split 'test'"):
        load(tmp_path, corpus, case()).for_split("test")


def test_duplicate_evidence_spans_are_collapsed_in_order(tmp_path: Path, corpus: Corpus) -> None:
    start = P1.index("Uptime")
    golden = load(
        tmp_path,
        corpus,
        case(
            evidence=[
                {"doc": "support/p1.md", "quote": "Uptime is 99.9%"},
                {"doc": "support/vpn.md", "quote": "restarts nightly"},
                {"doc": "support/p1.md", "start": start, "end": start + 15},
                {"doc": "support/vpn.md", "quote": "restarts nightly"},
            ]
        ),
    )
    assert [(s.doc, s.start) for s in golden.cases[0].evidence] == [
        ("support/p1.md", start),
        ("support/vpn.md", VPN.index("restarts")),
    ]


def test_quote_with_occurrence_resolves_in_the_loader(tmp_path: Path, corpus: Corpus) -> None:
    evidence = [{"doc": "support/p1.md", "quote": "uptime", "occurrence": 1}]
    golden = load(tmp_path, corpus, case(evidence=evidence))
    span = golden.cases[0].evidence[0]
    assert (span.start, span.end) == (P1.index("uptime"), P1.index("uptime") + 6)


def test_tolerant_quote_across_a_newline_resolves_in_the_loader(
    tmp_path: Path, corpus: Corpus
) -> None:
    evidence = [{"doc": "support/vpn.md", "quote": "VPN client restarts"}]
    span = load(tmp_path, corpus, case(evidence=evidence)).cases[0].evidence[0]
    assert VPN[span.start : span.end] == "VPN client\n   restarts"


def test_utf8_bom_is_accepted(tmp_path: Path, corpus: Corpus) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(case()).encode("utf-8") + b"\n")
    assert load_golden(GoldenConfig(path=str(path)), corpus).cases[0].id == "q-001"


def test_line_separator_inside_a_string_does_not_split_the_line(
    tmp_path: Path, corpus: Corpus
) -> None:
    line = json.dumps(case(question="Is it\u2028excluded\x85?"), ensure_ascii=False)
    golden = load(tmp_path, corpus, line, case(id="q-002"))
    assert [(c.question, c.line) for c in golden.cases] == [
        ("Is it\u2028excluded\x85?", 1),
        ("Is planned maintenance counted?", 2),
    ]


# --- load_golden: file-level errors -----------------------------------------------------


def test_missing_file_is_an_error(tmp_path: Path, corpus: Corpus) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(GoldenError, match="does not exist"):
        load_golden(GoldenConfig(path=str(missing)), corpus)


def test_directory_instead_of_file_is_an_error(tmp_path: Path, corpus: Corpus) -> None:
    with pytest.raises(GoldenError, match="is not a file"):
        load_golden(GoldenConfig(path=str(tmp_path)), corpus)


def test_file_without_cases_is_an_error(tmp_path: Path, corpus: Corpus) -> None:
    assert "contains no cases" in load_error(tmp_path, corpus, "", "  ")


def test_invalid_json_names_the_line(tmp_path: Path, corpus: Corpus) -> None:
    message = load_error(tmp_path, corpus, case(), "", '{"id": "q-002", "question": ')
    assert message.startswith(f"{tmp_path / 'golden.jsonl'}:3: invalid JSON")


def test_invalid_utf8_names_the_line(tmp_path: Path, corpus: Corpus) -> None:
    path = tmp_path / "golden.jsonl"
    path.write_bytes(json.dumps(case()).encode() + b'\n{"id": "caf\xe9"}\n')
    with pytest.raises(
        GoldenError, match=r"golden\.jsonl:2: not valid UTF-8 \(byte 0xe9 at column 12\)"
    ):
        load_golden(GoldenConfig(path=str(path)), corpus)


def test_a_lone_surrogate_names_the_line_and_field(tmp_path: Path, corpus: Corpus) -> None:
    """JSON can escape a lone surrogate; it is refused where it is read, not later by a
    writer that cannot encode it. An escaped pair is one character and is kept."""
    paired = json.dumps(case(id="q-002", question="Is \U0001f600 counted?"))
    assert "\\ud83d\\ude00" in paired
    lone = json.dumps(case(id="q-003", evidence=[{"doc": "support/p1.md", "quote": "x\udfff"}]))
    message = load_error(tmp_path, corpus, case(), paired, lone)
    assert message.startswith(f"{tmp_path / 'golden.jsonl'}:3: 'evidence'[0].'quote' holds")
    assert "lone surrogate (\\udfff at character 2)" in message
    assert ":2:" not in message


def test_non_object_line_is_an_error(tmp_path: Path, corpus: Corpus) -> None:
    assert "golden.jsonl:1: expected a JSON object, got list" in load_error(
        tmp_path, corpus, "[1, 2]"
    )


# --- load_golden: case fields -----------------------------------------------------------


def test_errors_start_with_file_line_and_case_id(tmp_path: Path, corpus: Corpus) -> None:
    message = load_error(tmp_path, corpus, case(), case(id="q-002", type=""))
    assert message.startswith(f"{tmp_path / 'golden.jsonl'}:2: case 'q-002': ")
    assert "'type' must be a non-empty string" in message


def test_duplicate_ids_name_both_lines(tmp_path: Path, corpus: Corpus) -> None:
    message = load_error(tmp_path, corpus, case(), case(id="q-002"), "", case())
    assert "golden.jsonl:4: case 'q-001': duplicate id (first defined on line 1)" in message


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"question": "q?", "answerable": False}, "missing required field 'id'"),
        (case(id=""), "'id' must be a non-empty string"),
        (case(id=7), "'id' must be a non-empty string, got 7"),
        ({"id": "q-001", "answerable": False}, "case 'q-001': missing required field 'question'"),
        (case(question="  "), "case 'q-001': 'question' must be a non-empty string"),
        (case(type=3), "'type' must be a non-empty string, got 3"),
        (case(answerable="yes"), "'answerable' must be true or false, got 'yes'"),
        (case(answerable=1), "'answerable' must be true or false, got 1"),
        (case(split="test"), "'split' must be one of tuning, holdout (or omitted), got 'test'"),
        (case(split=None), "'split' must be one of tuning, holdout"),
        (case(evidence={"doc": "faq.txt"}), "'evidence' must be a list, got dict"),
    ],
)
def test_invalid_field_values(
    tmp_path: Path, corpus: Corpus, record: dict[str, Any], expected: str
) -> None:
    message = load_error(tmp_path, corpus, record)
    assert message.startswith(f"{tmp_path / 'golden.jsonl'}:1:")
    assert expected in message


def test_unknown_field_is_named_with_a_suggestion(tmp_path: Path, corpus: Corpus) -> None:
    record = case()
    record["evidense"] = record.pop("evidence")
    message = load_error(tmp_path, corpus, record)
    assert "case 'q-001': unknown field 'evidense'" in message
    assert "did you mean 'evidence'?" in message


def test_misspelled_id_is_reported_as_unknown_field(tmp_path: Path, corpus: Corpus) -> None:
    record = case()
    record["ID"] = record.pop("id")
    message = load_error(tmp_path, corpus, record)
    assert "golden.jsonl:1: unknown field 'ID'" in message
    assert "did you mean 'id'?" in message


def test_answerable_case_needs_evidence(tmp_path: Path, corpus: Corpus) -> None:
    for record in (case(evidence=[]), {"id": "q-001", "question": "Why?"}):
        message = load_error(tmp_path, corpus, record)
        assert "case 'q-001'" in message
        assert '"answerable": true needs at least one "evidence" item' in message


def test_unanswerable_case_must_not_carry_evidence(tmp_path: Path, corpus: Corpus) -> None:
    message = load_error(tmp_path, corpus, case(answerable=False))
    assert 'case \'q-001\': "answerable": false must not carry "evidence"' in message


# --- load_golden: evidence --------------------------------------------------------------


def test_unknown_doc_id_suggests_a_near_match(tmp_path: Path, corpus: Corpus) -> None:
    evidence = [{"doc": "support/p1.mdx", "quote": "Uptime"}]
    message = load_error(tmp_path, corpus, case(evidence=evidence))
    assert "case 'q-001': evidence[0]: unknown doc 'support/p1.mdx'" in message
    assert "did you mean 'support/p1.md'?" in message


def test_unknown_doc_suggestion_ignores_case(tmp_path: Path, corpus: Corpus) -> None:
    evidence = [{"doc": "Support/VPN.md", "quote": "VPN"}]
    message = load_error(tmp_path, corpus, case(evidence=evidence))
    assert "unknown doc 'Support/VPN.md'" in message
    assert "did you mean 'support/vpn.md'?" in message


@pytest.mark.parametrize(
    ("start", "end"),
    [(-1, 5), (5, 5), (9, 3), (0, len(P1) + 1)],
)
def test_offsets_out_of_range_are_errors(
    tmp_path: Path, corpus: Corpus, start: int, end: int
) -> None:
    evidence = [{"doc": "support/p1.md", "start": start, "end": end}]
    message = load_error(tmp_path, corpus, case(evidence=evidence))
    assert f"evidence[0] ('support/p1.md'): offsets start={start}, end={end}" in message
    assert f"<= {len(P1)} (the document length)" in message


def test_offsets_up_to_the_document_end_are_valid(tmp_path: Path, corpus: Corpus) -> None:
    evidence = [{"doc": "support/p1.md", "start": 0, "end": len(P1)}]
    span = load(tmp_path, corpus, case(evidence=evidence)).cases[0].evidence[0]
    trimmed = len(P1.rstrip())  # the trailing newline is trimmed, like every chunk's
    assert (span.start, span.end, span.length) == (0, trimmed, trimmed)


def test_evidence_spans_are_trimmed_like_chunks(tmp_path: Path, corpus: Corpus) -> None:
    start = P1.index("Planned maintenance")
    evidence = [{"doc": "support/p1.md", "start": start - 1, "end": len(P1)}]
    span = load(tmp_path, corpus, case(evidence=evidence)).cases[0].evidence[0]
    assert P1[span.start : span.end] == P1[start - 1 :].strip()


def test_whitespace_only_spans_are_errors(tmp_path: Path, corpus: Corpus) -> None:
    gap = P1.index("\n")
    evidence = [{"doc": "support/p1.md", "start": gap, "end": gap + 1}]
    assert "holds only whitespace" in load_error(tmp_path, corpus, case(evidence=evidence))


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ({"doc": "faq.txt", "start": "0", "end": 3}, "'start' must be an integer, got '0'"),
        ({"doc": "faq.txt", "start": 0}, "'end' must be an integer, got None"),
        ({"doc": "faq.txt", "start": 0, "end": True}, "'end' must be an integer, got True"),
        ({"doc": "faq.txt", "quote": 5}, "'quote' must be a string, got 5"),
        ({"doc": "faq.txt", "quote": "No", "occurrence": "1"}, "'occurrence' must be an integer"),
        ({"doc": "faq.txt", "quote": "No", "start": 0, "end": 2}, "not both"),
        ({"doc": "faq.txt", "occurrence": 1, "end": 2}, "not both"),
        ({"doc": "faq.txt"}, 'needs "quote" (+ "occurrence") or "start" and "end"'),
        ({"quote": "No"}, "evidence[0]: doc id must be a non-empty string, got None"),
        ({"doc": "faq.txt", "quote": "No", "occurence": 1}, "did you mean 'occurrence'?"),
        ({"doc": "faq.txt", "start": 0, "ned": 2}, "unknown evidence[0] field 'ned'"),
        ("faq.txt", "evidence[0] must be an object, got str"),
    ],
)
def test_invalid_evidence_items(tmp_path: Path, corpus: Corpus, item: Any, expected: str) -> None:
    message = load_error(tmp_path, corpus, case(evidence=[item]))
    assert message.startswith(f"{tmp_path / 'golden.jsonl'}:1: case 'q-001': ")
    assert expected in message


def test_quote_not_found_names_case_doc_and_quote(tmp_path: Path, corpus: Corpus) -> None:
    evidence = [{"doc": "support/p1.md", "quote": "Refunds within 30 days"}]
    message = load_error(tmp_path, corpus, case(evidence=evidence))
    assert message.startswith(f"{tmp_path / 'golden.jsonl'}:1: case 'q-001': ")
    assert "evidence[0] ('support/p1.md'): quote 'Refunds within 30 days' not found" in message


def test_every_quote_not_found_is_listed_with_its_closest_passage(
    tmp_path: Path, corpus: Corpus
) -> None:
    bad = [
        case(id="a", evidence=[{"doc": "support/p1.md", "quote": "Uptime is 99.5% per month"}]),
        case(id="ok", evidence=[{"doc": "support/p1.md", "quote": "maintenance is *excluded*"}]),
        case(id="b", evidence=[{"doc": "support/vpn.md", "quote": "The VPN client reboots"}]),
    ]
    path = tmp_path / "golden.jsonl"
    lines = load_error(tmp_path, corpus, *bad).splitlines()
    assert lines[0] == f"{path}: 2 problems; fix them and run again:"
    assert lines[1] == (
        f"  {path}:1: case 'a': evidence[0] ('support/p1.md'): quote 'Uptime is 99.5% per month' "
        "not found (exact, ignoring whitespace and NFKC, or folded: "
        "docs/formats.md#how-quotes-are-matched); closest passage (line 3, 96% similar): "
        "'Uptime is 99.9% per month'; first difference at quote character 14: "
        "'5' (U+0035 DIGIT FIVE), the document has '9' (U+0039 DIGIT NINE)"
    )
    assert lines[2].startswith(f"  {path}:3: case 'b': evidence[0] ('support/vpn.md'): ")
    assert "closest passage (line 4, " in lines[2]
    assert "'The VPN client restarts'" in lines[2]


def test_ambiguous_quote_in_the_loader_suggests_occurrence(tmp_path: Path, corpus: Corpus) -> None:
    evidence = [{"doc": "support/p1.md", "quote": "uptime"}]
    message = load_error(tmp_path, corpus, case(evidence=evidence))
    assert "case 'q-001'" in message
    assert "occurs 2 times" in message
    assert '"occurrence"' in message


def test_occurrence_beyond_count_in_the_loader(tmp_path: Path, corpus: Corpus) -> None:
    evidence = [{"doc": "support/p1.md", "quote": "uptime", "occurrence": 3}]
    assert "occurrence=3 but quote 'uptime' occurs only 2" in load_error(
        tmp_path, corpus, case(evidence=evidence)
    )


# --- load_golden: scope -----------------------------------------------------------------


def test_scope_is_kept_and_deduplicated(tmp_path: Path, corpus: Corpus) -> None:
    scope = ["support/p1.md", "faq.txt", "support/p1.md"]
    golden = load(tmp_path, corpus, case(scope=scope))
    assert golden.cases[0].scope == ("support/p1.md", "faq.txt")


def test_scope_with_unknown_doc_is_an_error(tmp_path: Path, corpus: Corpus) -> None:
    message = load_error(tmp_path, corpus, case(scope=["support/p1.md", "faq.md"]))
    assert "case 'q-001': scope: unknown doc 'faq.md'" in message
    assert "did you mean 'faq.txt'?" in message


def test_evidence_outside_scope_is_an_error(tmp_path: Path, corpus: Corpus) -> None:
    message = load_error(tmp_path, corpus, case(scope=["support/vpn.md"]))
    assert "case 'q-001': evidence[0]: doc 'support/p1.md' is outside the case's scope" in message
    assert "could never be retrieved" in message


@pytest.mark.parametrize("scope", [[], "support/p1.md", [3]])
def test_malformed_scope_is_an_error(tmp_path: Path, corpus: Corpus, scope: Any) -> None:
    message = load_error(tmp_path, corpus, case(scope=scope))
    assert message.startswith(f"{tmp_path / 'golden.jsonl'}:1: case 'q-001': ")
    assert "scope" in message


def test_null_scope_means_whole_corpus(tmp_path: Path, corpus: Corpus) -> None:
    assert load(tmp_path, corpus, case(scope=None)).cases[0].scope is None


def test_unanswerable_case_may_have_a_scope(tmp_path: Path, corpus: Corpus) -> None:
    record = case(answerable=False, evidence=[], scope=["faq.txt"])
    golden = load(tmp_path, corpus, record)
    assert golden.cases[0].scope == ("faq.txt",)
    assert golden.cases[0].evidence == ()


def test_shared_mini_project_golden_set_loads(mini_project: Path) -> None:
    corpus = load_corpus(CorpusConfig(path=str(mini_project / "corpus")))
    golden = load_golden(GoldenConfig(path=str(mini_project / "golden.jsonl")), corpus)
    assert [c.id for c in golden.cases] == ["q1", "q2", "q3", "q4", "q5"]
    span = golden.cases[2].evidence[0]
    assert corpus.get(span.doc).text[span.start : span.end] == "ＶＰＮ経由でｻｰﾊﾞｰに接続できない"
    assert [c.id for c in golden.for_split("holdout")] == ["q5"]
    assert golden.types == ("factual", "negative", "procedural")
