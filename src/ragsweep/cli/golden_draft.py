"""``ragsweep-golden draft --n N --model M [--base-url URL] [--out FILE] [--seed S]``: a
model drafts questions with evidence quotes; a person reviews them in ``ragsweep label``.

Passages are sampled across the corpus (seeded), and the question types cycle through
factual, procedural, multi-document (two passages from two documents) and unanswerable
(a question the passage does not answer). The model is any OpenAI-compatible chat
endpoint (``--base-url``, ``--model``; an API key only from the environment variable named
by ``--api-key-env``, as for the judge). A draft is dropped, and counted, when its reply
is not the JSON asked for, when a quote is not verbatim in its passage's document, or when
its question nearly repeats one already in the golden set or kept, or is under three
words. Kept drafts are appended to ``FILE`` (default: the drafts file beside the golden
set) with ``status: draft`` and ``origin: drafted``: the loader skips them until a person
accepts them in the label app's review queue. Each draft records the model's identity, the
prompt's digest and the seed; the prompt itself is written beside ``FILE``
(``FILE.prompt.json``).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rapidfuzz import fuzz

from ragsweep.core.atomic import write_text_atomic
from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.core.hashing import sha256_json
from ragsweep.core.names import ORIGIN_DRAFTED, STATUS_DRAFT
from ragsweep.data.corpus import Corpus, Document
from ragsweep.data.golden_file import append_cases, evidence_item, read_golden_file
from ragsweep.index.remote.chat import ChatServer, JsonChat, Sampling
from ragsweep.index.remote.chat_apis import CHAT_APIS
from ragsweep.index.remote.http import RetryPolicy

TYPES = ("factual", "procedural", "multi-document", "unanswerable")
INSTRUCTIONS = {
    "factual": "Write one factual question a user could ask that this passage answers.",
    "procedural": "Write one how-to question (how do I ...) that this passage answers.",
    "multi-document": "Write one question that needs both passages to answer.",
    "unanswerable": (
        "Write one question a user of this product might ask that this passage does NOT "
        "answer. Give no quotes."
    ),
}
PROMPT = (
    "{instruction}\nThen copy, word for word, the shortest sentence of each passage that "
    "answers it (a quote must be an exact copy of text in the passage).\n"
    'Reply with JSON only: {{"question": "...", "quotes": ["..."]}}\n\n{passages}'
)
SCHEMA = {
    "type": "object",
    "properties": {
        "question": {"type": "string"},
        "quotes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["question", "quotes"],
}
PASSAGE_CHARS = (200, 900)
"""A passage: whole paragraphs of a document, at least 200 and at most about 900 characters."""
MIN_QUESTION_WORDS = 3
"""A reply with fewer words is no question (Gemma 3 270M answers ``...`` at times)."""
DUPLICATE_RATIO = 90.0
"""Questions at least this similar (rapidfuzz token-set ratio, 0-100) are near-duplicates."""


@dataclass(frozen=True)
class Passage:
    doc: Document
    start: int
    end: int

    @property
    def text(self) -> str:
        return self.doc.text[self.start : self.end]


@dataclass(frozen=True)
class DraftOptions:
    n: int
    model: str
    base_url: str
    api_key_env: str | None
    seed: int
    max_tokens: int
    timeout: float


def passages(doc: Document) -> list[Passage]:
    """Runs of paragraphs of ``doc`` within :data:`PASSAGE_CHARS`."""
    found: list[Passage] = []
    start = None
    for match in re.finditer(r"\S(?:.|\n(?!\s*\n))*", doc.text):
        start = match.start() if start is None else start
        if match.end() - start >= PASSAGE_CHARS[0]:
            found.append(Passage(doc, start, min(match.end(), start + PASSAGE_CHARS[1])))
            start = None
    return found


def draft(
    corpus: Corpus, existing: Sequence[str], options: DraftOptions
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """``options.n`` attempts; the kept drafts and what happened to each attempt."""
    rng = random.Random(options.seed)
    pool = [p for doc in corpus for p in passages(doc)]
    if len(pool) < 2:
        raise ConfigError("the corpus has fewer than two passages of 200+ characters to draft from")
    server = ChatServer(
        options.base_url,
        RetryPolicy(timeout=options.timeout),
        options.api_key_env,
        (options.model,),
        "--base-url",
        "--api-key-env",
    )
    api = CHAT_APIS.get("openai")(server)
    model = api.describe(options.model)
    chat = JsonChat(api)
    sampling = Sampling(0.7, options.seed, options.max_tokens, 0)
    questions = list(existing)
    kept: list[dict[str, Any]] = []
    outcome: Counter[str] = Counter()
    for number in range(options.n):
        kind = TYPES[number % len(TYPES)]
        chosen = _choose(rng, pool, kind)
        text = "\n\n".join(f"Passage {i + 1}:\n{p.text}" for i, p in enumerate(chosen))
        prompt = PROMPT.format(instruction=INSTRUCTIONS[kind], passages=text)
        try:
            reply, _mode = chat.chat(
                options.model,
                [{"role": "user", "content": prompt}],
                Sampling(sampling.temperature, options.seed + number, sampling.max_tokens, 0),
                SCHEMA,
            )
            record = _record(reply.text, kind, chosen, corpus)
        except BackendError:
            outcome["no answer"] += 1
            continue
        except ValueError as exc:
            outcome[str(exc)] += 1
            continue
        if any(fuzz.token_set_ratio(record["question"], q) >= DUPLICATE_RATIO for q in questions):
            outcome["near-duplicate question"] += 1
            continue
        questions.append(record["question"])
        record["id"] = f"draft-{options.seed}-{number + 1:03d}"
        record["metadata"] = {
            "draft": {
                "model": model.name,
                "model_fingerprint": model.fingerprint,
                "seed": options.seed,
                "call_seed": options.seed + number,
                "prompt_sha256": sha256_json(PROMPT)[:16],
                "passages": [[p.doc.id, p.start, p.end] for p in chosen],
            }
        }
        kept.append({"id": record.pop("id"), **record})
        outcome["kept"] += 1
    return kept, outcome


def _choose(rng: random.Random, pool: list[Passage], kind: str) -> list[Passage]:
    first = rng.choice(pool)
    if kind != "multi-document":
        return [first]
    others = [p for p in pool if p.doc.id != first.doc.id] or pool
    return [first, rng.choice(others)]


def _record(reply: str, kind: str, chosen: list[Passage], corpus: Corpus) -> dict[str, Any]:
    """The draft of a reply; ValueError naming why it is dropped."""
    try:
        value = json.loads(reply)
        question = str(value["question"]).strip()
        quotes = [str(q).strip() for q in value.get("quotes") or [] if str(q).strip()]
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        raise ValueError("reply not the JSON asked for") from None
    if len(re.findall(r"\w+", question)) < MIN_QUESTION_WORDS:
        raise ValueError("no question (under 3 words)")
    record: dict[str, Any] = {"question": question, "type": kind}
    if kind == "unanswerable":
        return {**record, "answerable": False, "status": STATUS_DRAFT, "origin": ORIGIN_DRAFTED}
    if not quotes:
        raise ValueError("no quote")
    evidence = [_verbatim(quote, chosen, corpus) for quote in quotes]
    return {
        **record,
        "answerable": True,
        "evidence": evidence,
        "status": STATUS_DRAFT,
        "origin": ORIGIN_DRAFTED,
    }


def _verbatim(quote: str, chosen: list[Passage], corpus: Corpus) -> dict[str, Any]:
    """The evidence item of a quote found exactly in one of the passages, else ValueError."""
    for passage in chosen:
        at = passage.text.find(quote)
        if at != -1:
            start = passage.start + at
            return evidence_item(corpus, passage.doc.id, start, start + len(quote))
    raise ValueError("quote not verbatim in its passage")


def run_draft(corpus: Corpus, golden_path: Path, out: Path, options: DraftOptions) -> str:
    """Draft, append the kept drafts to ``out``, and return the summary to print."""
    existing = [
        str(line.record.get("question"))
        for path in (golden_path, out)
        for line in read_golden_file(path).records()
        if line.record is not None
    ]
    started = time.monotonic()
    kept, outcome = draft(corpus, existing, options)
    seconds = time.monotonic() - started
    current = read_golden_file(out)
    append_cases(out, current.digest, kept)
    provenance = {
        "prompt": PROMPT,
        "instructions": INSTRUCTIONS,
        "schema": SCHEMA,
        "seed": options.seed,
        "model": options.model,
        "base_url": options.base_url,
        "temperature": 0.7,
    }
    write_text_atomic(
        out.with_name(out.name + ".prompt.json"), json.dumps(provenance, indent=2) + "\n"
    )
    dropped = ", ".join(f"{count} {why}" for why, count in sorted(outcome.items()) if why != "kept")
    return (
        f"drafted {options.n} in {seconds:.1f} s ({seconds / max(options.n, 1):.2f} s per draft): "
        f"kept {outcome['kept']}, dropped {options.n - outcome['kept']}"
        + (f" ({dropped})" if dropped else "")
        + f"\nwrote {len(kept)} drafts to {out}; review them with `ragsweep label` "
        "(nothing is scored until accepted)\n"
    )
