"""A sweep's inputs are fixed when it starts: each job checks it reads the same data.

The sweeper takes the golden set's and the corpus's content digests once, when the sweep
starts, and gives every job them as the tags ``ragsweep.sweep_golden_digest`` and
``ragsweep.sweep_corpus_digest`` (``tracking.tags``, not part of the config hash). A job
that reads a golden set or corpus with another digest (the file was edited while the sweep
ran) fails with :class:`InputsChangedError` before any work, so no decision of the sweep
compares values scored on different cases (docs/sweeps.md). A sweep over parsers gives
its jobs the digest of the corpus's source files instead (``ragsweep.sweep_corpus_files_digest``:
each parser gives other texts, so there is no one content digest).
"""

from __future__ import annotations

from collections.abc import Mapping

from ragsweep.config.schema import CorpusConfig
from ragsweep.core import tags as tag
from ragsweep.core.errors import RagsweepError
from ragsweep.data.corpus import Corpus, corpus_files_digest
from ragsweep.data.golden import GoldenSet


class InputsChangedError(RagsweepError):
    """The golden set or the corpus changed while the sweep ran (names the file)."""


def check_sweep_inputs(
    tags: Mapping[str, str], golden: GoldenSet, corpus: Corpus, corpus_cfg: CorpusConfig
) -> None:
    """Raise InputsChangedError when ``golden``, ``corpus`` or its source files (read as
    ``corpus_cfg`` says) are not what the sweep saw at its start (``tags``: the job's
    ``tracking.tags``; nothing to check outside a sweep)."""
    seen = (
        ("golden set", tag.SWEEP_GOLDEN, golden.path, lambda: golden.digest),
        ("corpus", tag.SWEEP_CORPUS, corpus_cfg.path, corpus.content_hash),
        (
            "corpus",
            tag.SWEEP_CORPUS_FILES,
            corpus_cfg.path,
            lambda: corpus_files_digest(corpus_cfg),
        ),
    )
    for what, key, where, digest in seen:
        was = tags.get(key)
        if was is None:
            continue
        now = digest()
        if now != was:
            raise InputsChangedError(
                f"{what} changed during the sweep: {where} now hashes to {now[:12]}, was "
                f"{was[:12]}; this job was not evaluated. Restore it and run the same command "
                "again (the failed jobs run again), or start the sweep afresh on the new data"
            )
