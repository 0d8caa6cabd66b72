"""The Markdown of a comparison (``comparison.md``, and what ``ragsweep-compare`` prints):
the decision, per-metric and per-type deltas, and each flipped case with its question, span
ranks, packing and the stage that lost its evidence (:mod:`ragsweep.release.compare`)."""

from __future__ import annotations

from collections.abc import Mapping

from rich.cells import cell_len

from ragsweep.core import tags as tag
from ragsweep.core.terminal import MARKDOWN_WIDTH, fit_markdown, markdown_table
from ragsweep.eval import measures
from ragsweep.eval.attribution import (
    describe_counts,
)
from ragsweep.eval.scoring import RetrievedChunk
from ragsweep.release.compare import Comparison, Delta, Flip, span_rows
from ragsweep.run.report import markdown_tables


def render_markdown(comparison: Comparison) -> str:
    """The comparison as a Markdown document (printed, and logged as ``comparison.md``)."""
    c = comparison
    lines = [
        "# Comparison: candidate vs baseline",
        "",
        f"- **baseline**: `{c.baseline.run_id}` ({c.baseline.name})",
        f"- **candidate**: `{c.candidate.run_id}` ({c.candidate.name})",
        f"- **split**: {c.candidate.tag(tag.SPLIT)}; **golden digest**: "
        f"{c.candidate.tag(tag.GOLDEN_DIGEST)[:12]}; "
        f"**corpus**: {c.candidate.tag(tag.CORPUS_HASH)[:12]}",
        f"- **paired cases**: {c.n_cases} ({c.n_answerable} answerable, scored in both)",
        f"- **primary metric**: `{c.metric}`; flips counted on `{c.flips_on}`",
    ]
    lines += [f"- **differs**: {m}" for m in c.mismatches]
    if c.unpaired:
        lines.append(f"- **in one run only (left out)**: {', '.join(c.unpaired)}")
    lines += ["", f"**{c.decision()}**", ""]
    if c.power is not None:
        lines += [f"Power: {c.power}.", ""]
    lines += ["## Overall (mean over answerable cases)", ""]
    lines.append(_delta_table("metric", c.overall, 4))
    lines += ["", "## Δ by question type (candidate − baseline)", "", _by_type_table(c), ""]
    lines += _flip_sections(c)
    lines += ["## Paired significance", "", c.test.describe() + ".", ""]
    lines += ["## Latency (ms per query, retrieval only)", ""]
    lines.append(_delta_table("measure", c.latency, 3))
    return fit_markdown("\n".join(lines)) + "\n"


def _delta_table(first: str, deltas: Mapping[str, Delta], digits: int) -> str:
    """One row per name: baseline, candidate and their difference at ``digits`` decimals."""
    rows = [
        [name, f"{d.baseline:.{digits}f}", f"{d.candidate:.{digits}f}", f"{d.delta:+.{digits}f}"]
        for name, d in deltas.items()
    ]
    return markdown_table([first, "baseline", "candidate", "Δ"], rows)


def _by_type_table(c: Comparison) -> str:
    """Metrics (rows) by question type (columns), the first row each type's n; split into
    several tables when the types do not fit in :data:`MARKDOWN_WIDTH` columns."""
    types = list(c.by_type)
    metrics = list(c.overall)
    counts = ["n", *(str(c.type_counts.get(t, 0)) for t in types)]
    rows = [
        [m, *(f"{c.by_type[t][m].delta:+.4f}" if m in c.by_type[t] else "n/a" for t in types)]
        for m in metrics
    ]
    return markdown_tables(["metric", *types], [counts, *rows])


def _flip_sections(c: Comparison) -> list[str]:
    lines = [
        f"## Flipped cases ({c.flips_on})",
        "",
        f"By the first stage that lost the evidence (docs/promotion.md): hit → miss "
        f"{describe_counts(c.attribution['lost'])}; miss → hit "
        f"{describe_counts(c.attribution['gained'])}.",
        "",
    ]
    for title, flips, lost in (
        (f"hit → miss ({len(c.lost)})", c.lost, True),
        (f"miss → hit ({len(c.gained)})", c.gained, False),
    ):
        lines += [f"### {title}", ""]
        if not flips:
            lines += ["none", ""]
            continue
        for f in flips:
            lines += _flip_lines(f, lost, _reach_label(c.flips_on))
        lines.append("")
    return lines


def _reach_label(flips_on: str) -> str:
    """``packed`` for a budget's hit measure, ``in top k`` for a cut-off's."""
    measure = measures.parse(flips_on)
    return "packed" if measure.budget is not None else f"in top {measure.k}"


def _flip_lines(f: Flip, lost: bool, reach: str) -> list[str]:
    """One flipped case: question, first chunks, each span in both runs, the stage and the
    next action (for a gained case: what the candidate fixed)."""
    lines = [f"- `{f.case_id}` ({f.type})"]
    if f.question:
        lines += _cell_lines(f"question: {f.question}", "  - ", "    ")
    lines.append(
        f"  - first chunk: baseline {_chunk(f.baseline_first)}; candidate "
        f"{_chunk(f.candidate_first)}"
    )
    for number, row in enumerate(span_rows(f.baseline, f.candidate), start=1):
        b, c = row["baseline"], row["candidate"]
        lines.append(
            f"  - span {number}: rank {_rank(b['rank'])} → {_rank(c['rank'])}; {reach} "
            f"{_yes(b['packed'])} → {_yes(c['packed'])}; chunk {_held(b['chunk_chars'])} → "
            f"{_held(c['chunk_chars'])}"
        )
    run = "candidate" if lost else "baseline"
    lines.append(f"  - stage: **{f.cause.stage}** ({run}: {f.cause.detail})")
    action = f.cause.action if lost else "none: the candidate fixed it"
    lines.append(f"  - next action: {action}")
    return lines


def _cell_lines(text: str, first: str, rest: str, width: int = MARKDOWN_WIDTH) -> list[str]:
    """``text`` in lines of at most ``width`` terminal cells, broken at spaces, and inside a
    word only when the word alone is wider (a question in Japanese has no spaces and two
    cells per character)."""
    lines: list[str] = []
    line = first
    for word in text.split():
        joined = word if line in (first, rest) else " " + word
        if cell_len(line + joined) <= width:
            line += joined
            continue
        if line not in (first, rest):
            lines.append(line)
            line = rest
        for char in word:
            if cell_len(line + char) > width:
                lines.append(line)
                line = rest
            line += char
    return [*lines, line]


def _rank(rank: int | None) -> str:
    return "—" if rank is None else str(rank)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _held(chars: int | str | None) -> str:
    if isinstance(chars, str):
        return chars
    return "split" if chars is None else f"{chars} chars"


def _chunk(chunk: RetrievedChunk | None) -> str:
    if chunk is None:
        return "(nothing retrieved)"
    return f"`{chunk.doc}` [{chunk.start}:{chunk.end}] score {chunk.score:.3f}"
