"""Quotes matched as people copy them: folding (typographic quotes, dashes, spaces, Markdown
inline markup) mapped back to exact source offsets, and the closest passage of a quote that
does not resolve, down to ``ragsweep check`` on a project folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragsweep.data.quotes import resolve_quote
from tests.check.test_check import problem_lines
from tests.cli.test_project import ragsweep, write

GUIDE = (
    "# Tokens\n"
    "\n"
    "You **can’t** reset the `api_token` yourself — ask an admin.\n"
    'Read [the rotation guide](https://example.com/rotate "Rotation") first, or '
    "<https://example.com/help>.\n"
    "The old flow is ~~deprecated~~ gone. ![Token screen](img/token.png)\n"
    "Keys expire after 90\u00a0days\u2009–\u2009renew them with “rotate”.\n"
)


def span(text: str, quote: str, occurrence: int | None = None) -> str:
    start, end = resolve_quote(text, quote, occurrence)
    return text[start:end]


@pytest.mark.parametrize(
    ("quote", "expected"),
    [
        # typographic quotes typed straight
        ("You can't reset", "You **can’t** reset"),
        ('renew them with "rotate"', "renew them with “rotate”"),
        # dashes typed as hyphens, non-breaking and thin spaces typed as spaces
        ("yourself - ask an admin", "yourself — ask an admin"),
        ("after 90 days - renew", "after 90\u00a0days\u2009–\u2009renew"),
        # Markdown inline markup gone from the rendered page
        ("reset the api_token yourself", "reset the `api_token` yourself"),
        ("Read the rotation guide first", GUIDE[GUIDE.index("Read") : GUIDE.index(" first") + 6]),
        ("the rotation guide", "the rotation guide"),
        ("or https://example.com/help.", "or <https://example.com/help>."),
        ("is deprecated gone", "is ~~deprecated~~ gone"),
        ("gone. Token screen", "gone. ![Token screen"),
        ("Token screen", "Token screen"),
    ],
)
def test_folded_quote_maps_back_to_the_exact_source_span(quote: str, expected: str) -> None:
    assert span(GUIDE, quote) == expected


def test_a_match_starts_and_ends_on_text_not_on_the_markup_around_it() -> None:
    assert span(GUIDE, "can't") == "can’t"  # not "**can’t**"
    assert span(GUIDE, "api_token") == "api_token"  # exact: not "`api_token`"
    assert span(GUIDE, "rotation guide") == "rotation guide"  # not "rotation guide]"
    assert span(GUIDE, "https://example.com/help") == "https://example.com/help"


def test_markup_in_the_quote_is_ignored_as_in_the_document() -> None:
    assert span(GUIDE, "You *can't* reset") == "You **can’t** reset"
    assert (
        span(GUIDE, "[the rotation guide](elsewhere) first")
        == (GUIDE[GUIDE.index("the rotation") : GUIDE.index(" first") + 6])
    )


def test_invisible_characters_are_ignored() -> None:
    text = "Rotate the pass\u00adword every\u200b month."
    assert span(text, "password every month") == "pass\u00adword every\u200b month"


@pytest.mark.parametrize(
    ("text", "quote", "expected"),
    [
        ("It’s here. It's here.", "It's here", (11, 20)),  # exact still wins over folded
        ('a “b” c and a "b" c', 'a "b" c', (12, 19)),
        ("x **bold** y", "**bold**", (2, 10)),  # markup quoted verbatim stays in the span
        ("x\u00a0y", "x y", (0, 3)),  # NFKC already matched this before folding existed
    ],
)
def test_what_resolved_before_folding_resolves_to_the_same_span(
    text: str, quote: str, expected: tuple[int, int]
) -> None:
    assert resolve_quote(text, quote) == expected


def test_a_quote_that_occurs_twice_after_folding_is_ambiguous() -> None:
    text = "Don’t reset it.\nDon‘t **reset** it.\n"
    with pytest.raises(ValueError) as info:
        resolve_quote(text, "Don't reset it")
    assert str(info.value) == (
        'quote "Don\'t reset it" occurs 2 times (at 0-14, 16-34); '
        'add "occurrence": 1..2 to choose one'
    )
    assert span(text, "Don't reset it", occurrence=2) == "Don‘t **reset** it"
    with pytest.raises(ValueError, match=r"occurrence=3 but quote .* occurs only 2 time"):
        resolve_quote(text, "Don't reset it", occurrence=3)


def test_an_unresolved_quote_names_the_closest_passage_and_the_first_difference() -> None:
    with pytest.raises(ValueError) as info:
        resolve_quote(GUIDE, "Keys expire after 30 days")
    assert str(info.value) == (
        "quote 'Keys expire after 30 days' not found (exact, ignoring whitespace and NFKC, or "
        "folded: docs/formats.md#how-quotes-are-matched); closest passage (line 6, 96% "
        "similar): 'Keys expire after 90 days'; first difference at quote character 19: "
        "'3' (U+0033 DIGIT THREE), the document has '9' (U+0039 DIGIT NINE)"
    )


def test_an_invisible_difference_is_shown_by_its_code_point() -> None:
    text = "Intro.\nSet the timeout to five seconds.\n"
    with pytest.raises(ValueError) as info:
        resolve_quote(text, "Set the time\u200dout to five seconds")
    message = str(info.value)
    assert "closest passage (line 2, " in message
    assert "'Set the timeout to five seconds'" in message
    assert (
        "first difference at quote character 13: '\\u200d' (U+200D ZERO WIDTH JOINER), "
        "the document has 'o' (U+006F LATIN SMALL LETTER O)"
    ) in message


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_the_closest_passage_line_counts_every_kind_of_line_break(newline: str) -> None:
    text = newline.join(["Intro.", "", "Set the timeout to five seconds.", ""])
    with pytest.raises(ValueError) as info:
        resolve_quote(text, "Set the timeout to six seconds")
    assert "closest passage (line 3, " in str(info.value)


def test_a_quote_with_nothing_close_says_so() -> None:
    with pytest.raises(ValueError) as info:
        resolve_quote(GUIDE, "zzzz qqqq xxxx")
    assert "no passage of the document is close to it (the best, on line " in str(info.value)


def test_the_closest_passage_is_shortened() -> None:
    sentence = "The quick brown fox jumps over the lazy dog near the river bank at dawn today"
    text = f"Title\n\n{sentence}.\n"
    with pytest.raises(ValueError) as info:
        resolve_quote(text, sentence.replace("lazy", "sleepy"))
    message = str(info.value)
    assert "closest passage (line 3, " in message
    assert "'The quick brown fox jumps over the lazy dog near the river …'" in message
    assert "quote character 36: 's' (U+0073 LATIN SMALL LETTER S)" in message


def test_ragsweep_check_shows_the_closest_passage(tmp_path: Path) -> None:
    """A project folder (its own corpus and golden config): a straight apostrophe and a
    rendered link resolve, a wrong word is reported with the closest passage."""
    write(tmp_path / "docs/tokens.md", GUIDE)
    write(tmp_path / "conf/corpus/mine.yaml", "name: mine\npath: ${paths.root_dir}/docs\n")
    write(tmp_path / "conf/golden/mine.yaml", "path: ${paths.root_dir}/golden.jsonl\n")
    quotes = {
        "ok-1": "You can't reset the api_token yourself",
        "ok-2": "Read the rotation guide first",
        "bad": "Keys expire after 30 days",
    }
    cases = [
        {"id": case_id, "question": "?", "evidence": [{"doc": "tokens.md", "quote": quote}]}
        for case_id, quote in quotes.items()
    ]
    golden = write(tmp_path / "golden.jsonl", "".join(json.dumps(c) + "\n" for c in cases))
    out = ragsweep("check", "corpus=mine", "golden=mine", "tracking=off", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = problem_lines(out.stderr)
    assert lines[0] == "ragsweep check: 1 problem(s); nothing was run"
    assert lines[1].strip() == (
        f"{golden}:3: case 'bad': evidence[0] ('tokens.md'): quote 'Keys expire after 30 days' "
        "not found (exact, ignoring whitespace and NFKC, or folded: "
        "docs/formats.md#how-quotes-are-matched); closest passage (line 6, 96% similar): "
        "'Keys expire after 90 days'; first difference at quote character 19: "
        "'3' (U+0033 DIGIT THREE), the document has '9' (U+0039 DIGIT NINE)"
    )
