"""``ragsweep embed --shard I/N [OVERRIDES...]``: embed part I of N of one configuration's
texts into the (shared) cache, so that N workers split the embedding of a large corpus.

The texts are the configuration's indexed chunk texts and its split's preprocessed
questions, exactly as a run embeds them. Each distinct text belongs to one part, chosen by
its sha256 (the key the embedding store files it under), so the N parts are disjoint and
together hold every text, whatever the order of the corpus and whichever worker runs first.
A worker embeds only what its part lacks in the store; the vectors go into the
content-addressed embedding store (:class:`ragsweep.cache.embeddings.EmbeddingStore`), where the run
of the same configuration finds every one of them (``cache/embeddings/misses`` = 0).
Workers on several hosts share the store through ``cache.dir`` on a shared file system
(docs/deploy.md, "Splitting the embedding of one configuration").
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragsweep.cache.stage import StageCache
from ragsweep.cli.errors import reported_errors
from ragsweep.config.app import compose, plain_config
from ragsweep.core.errors import ConfigError
from ragsweep.core.hashing import sha256_text
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import load_golden
from ragsweep.eval.scoring import make_queries
from ragsweep.index.backends import BACKENDS
from ragsweep.index.semantic import with_sentence_embedder
from ragsweep.index.stages import (
    cached_chunks,
    cached_texts,
    chunks_key,
    document_titles,
    texts_key,
)
from ragsweep.run.config import ResolvedConfig, resolve, select_cases

_SHARD = re.compile(r"^(\d+)/(\d+)$")


@dataclass(frozen=True)
class Shard:
    """Part ``index`` (1-based) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/4"`` → ``Shard(2, 4)``; ConfigError unless ``1 <= I <= N``."""
        match = _SHARD.match(text.strip())
        if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
            raise ConfigError(f"--shard {text!r} must be I/N with 1 <= I <= N, e.g. 1/4")
        return cls(int(match.group(1)), int(match.group(2)))

    def holds(self, text: str) -> bool:
        """Whether ``text`` is in this part (by its sha256, as the store keys it)."""
        return int(sha256_text(text)[:16], 16) % self.count == self.index - 1

    def part(self, texts: Sequence[str]) -> list[str]:
        """The distinct texts of ``texts`` in this part, in first-seen order."""
        return [t for t in dict.fromkeys(texts) if self.holds(t)]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class ShardOutcome:
    """What one part held and what had to be embedded for it (counts of distinct texts)."""

    shard: Shard
    chunk_texts: int
    chunk_texts_total: int
    queries: int
    queries_total: int
    computed: int


def embed_shard(resolved: ResolvedConfig, shard: Shard) -> ShardOutcome:
    """Embed ``shard``'s part of the chunk texts and questions of ``resolved`` into its
    cache (see module docstring)."""
    cfg = resolved.cfg
    backend = BACKENDS.get(cfg.embedding.backend)
    embedders = getattr(backend, "store_embedders", None)
    if embedders is None:
        raise ConfigError(
            f"embedding.backend={cfg.embedding.backend} keeps no vectors in the cache: "
            "there is nothing to embed ahead (dense backends do: use_m3, "
            "sentence_transformers, ollama, openai)"
        )
    if not cfg.cache.enabled:
        raise ConfigError("cache.enabled=false: the parts would be embedded and thrown away")
    cache = StageCache(Path(cfg.cache.dir))
    corpus = load_corpus(cfg.corpus)
    tools = with_sentence_embedder(resolved.chunk_tools, cfg.chunking, cfg.embedding, cache)
    chunk_set = chunks_key(corpus, cfg.chunking, tools)
    chunks = cached_chunks(corpus, cfg.chunking, chunk_set, cache, tools)
    key = texts_key(chunk_set, cfg.chunking, resolved.preprocessor)
    titles = document_titles(corpus, cfg.chunking)
    prefix = cfg.chunking.heading_prefix
    texts = cached_texts(chunks, key, prefix, resolved.preprocessor, cache, titles)
    cases = select_cases(load_golden(cfg.golden, corpus), cfg.eval.split)
    questions = [q.text for q in make_queries(cases, resolved.preprocessor, lambda scope: None)]
    chunk_embedder, query_embedder = embedders(cfg.embedding, resolved.model, cache)
    mine, my_questions = shard.part(texts), shard.part(questions)
    if mine:
        chunk_embedder.embed(mine)
    if my_questions:
        query_embedder.embed(my_questions)
    computed = sum(cache.stats.stage(s).misses for s in ("embeddings", "query_embeddings"))
    return ShardOutcome(
        shard, len(mine), len(set(texts)), len(my_questions), len(set(questions)), computed
    )


def describe(outcome: ShardOutcome, resolved: ResolvedConfig) -> str:
    """The one line a worker prints when its part is done."""
    o = outcome
    return (
        f"shard {o.shard}: {o.chunk_texts} of {o.chunk_texts_total} distinct chunk texts and "
        f"{o.queries} of {o.queries_total} questions; {o.computed} embedded now, the rest "
        f"was cached ({resolved.model.describe()}, cache {resolved.cfg.cache.dir})"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragsweep embed",
        description="Embed part I of N of a configuration's texts into the shared cache.",
    )
    parser.add_argument("--shard", required=True, metavar="I/N", help="e.g. 1/4")
    parser.add_argument("overrides", nargs="*", help="the configuration, as for ragsweep")
    return parser


def main(argv: Sequence[str]) -> int:
    """Entry point of ``ragsweep embed`` (exit status 0, or 2 on a user error)."""
    args = build_parser().parse_args(list(argv))
    with reported_errors():
        shard = Shard.parse(args.shard)
        resolved = resolve(plain_config(compose(args.overrides)))
        outcome = embed_shard(resolved, shard)
    print(describe(outcome, resolved))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
