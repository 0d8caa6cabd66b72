"""The judge stage of a run: prepare (validate models and rubric before any work), then for
every evaluated case pack the context, generate, judge, verify the evidence quote, apply
the rubric's refusal rule, and summarize.

Model outputs are cached per (case, packed context hash, generator and judge model digests,
rubric hash, sampling settings) in the run's stage cache (stage ``judge``), so a second run
over the same contexts makes no model call.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragsweep.cache import StageCache
from ragsweep.chunking import Chunk
from ragsweep.config import result_fields
from ragsweep.evaluate import CaseResult
from ragsweep.golden import GoldenCase
from ragsweep.hashing import sha256_json
from ragsweep.judge.calls import ModelOutput, Models
from ragsweep.judge.config import JudgeConfig, Rubric, load_rubric
from ragsweep.judge.context import PackedContext, coverages, pack_context
from ragsweep.judge.results import CaseJudgment, JudgeOutcome, ModelInfo
from ragsweep.progress import progress_bar
from ragsweep.remote.http import RetryPolicy
from ragsweep.remote.ollama import OllamaModel, lookup_model, ollama_client

log = logging.getLogger(__name__)
CACHE_STAGE = "judge"
REFUSAL_RULE = "refusal_on_unanswerable"


class SelfPreferenceWarning(UserWarning):
    """The generator and the judge are the same model: judges favour their own answers."""


@dataclass(frozen=True)
class JudgeStage:
    """A validated, ready judge: config, rubric and both models as the server knows them."""

    cfg: JudgeConfig
    rubric: Rubric
    models: Models
    generator: OllamaModel
    judge: OllamaModel

    def run(
        self,
        cases: Sequence[GoldenCase],
        results: Sequence[CaseResult],
        chunks: Sequence[Chunk],
        cache: StageCache,
    ) -> JudgeOutcome:
        """Judge every case from its own retrieved chunks (never the rest of the corpus)."""
        by_id = {c.id: c for c in chunks}
        judgments = []
        with progress_bar("generating and judging", len(cases)) as advance:
            for case, result in zip(cases, results, strict=True):
                packed = pack_context(
                    result.retrieved, by_id, self.cfg.context_chunks, self.cfg.context_chars
                )
                output = self.outputs(case, packed, cache)
                if output.failure:
                    log.warning("judge failure on case %s: %s", case.id, output.failure)
                judgments.append(self.judgment(case, result, packed, output))
                advance(1)
        return JudgeOutcome(
            judgments=tuple(judgments),
            generator=ModelInfo(self.generator.name, self.generator.digest),
            judge=ModelInfo(self.judge.name, self.judge.digest),
            rubric_digest=self.rubric.digest,
            cfg=self.cfg,
        )

    def outputs(self, case: GoldenCase, packed: PackedContext, cache: StageCache) -> ModelOutput:
        """The models' outputs for one case, from the cache or by calling them."""
        return cache.json_value(
            CACHE_STAGE,
            self.cache_key(case, packed),
            lambda: self.models.run(case.question, packed),
            ModelOutput.to_json,
            ModelOutput.from_json,
        )

    def cache_key(self, case: GoldenCase, packed: PackedContext) -> str:
        return sha256_json(
            {
                "case": {"id": case.id, "question": case.question},
                "context": packed.digest,
                "generator": [self.generator.name, self.generator.digest],
                "judge": [self.judge.name, self.judge.digest],
                "rubric": self.rubric.digest,
                "temperature": 0,
                "settings": result_fields(self.cfg),
            }
        )

    def judgment(
        self, case: GoldenCase, result: CaseResult, packed: PackedContext, output: ModelOutput
    ) -> CaseJudgment:
        """One case's record: coverages, answer, verdict, evidence check and refusal rule."""
        candidate, packed_coverage = coverages(result.retrieved, packed, case.evidence)
        verdict = output.verdict
        scores: dict[str, Any] = {}
        rule = None
        if verdict is not None:
            scores = {"faithfulness": verdict.faithfulness, "relevance": verdict.relevance}
            if verdict.refusal and not case.answerable:
                scores = dict(self.rubric.refusal_on_unanswerable)
                rule = REFUSAL_RULE
        return CaseJudgment(
            case_id=case.id,
            type=case.type,
            answerable=case.answerable,
            candidate_coverage=candidate,
            packed_coverage=packed_coverage,
            packed_chunks=tuple(p.chunk_id for p in packed.passages),
            packed_chars=packed.chars,
            truncated=packed.truncated,
            context_hash=packed.digest,
            answer=output.answer,
            faithfulness=scores.get("faithfulness"),
            relevance=scores.get("relevance"),
            judge_scores=(verdict.faithfulness, verdict.relevance) if verdict else None,
            refusal=verdict.refusal if verdict else None,
            evidence=verdict.evidence if verdict else "",
            evidence_status=_evidence_status(verdict.evidence, packed) if verdict else None,
            note=verdict.note if verdict else "",
            rule=rule,
            failure=output.failure,
            attempts=output.attempts,
        )


def _evidence_status(quote: str, packed: PackedContext) -> str:
    if not quote.strip():
        return "none"
    return "verified" if packed.contains_quote(quote) else "unverified"


def prepare_judge(cfg: JudgeConfig) -> JudgeStage | None:
    """Check the rubric and that both models exist on the server (a round trip), before
    any retrieval work; None when ``judge.enabled`` is false."""
    if not cfg.enabled:
        return None
    rubric = load_rubric(cfg.rubric)
    policy = RetryPolicy.of(cfg)
    client = ollama_client(
        cfg.base_url, policy, list(dict.fromkeys([cfg.generator, cfg.judge])), "judge.base_url"
    )
    generator = lookup_model(client, cfg.generator, "completion")
    judge = lookup_model(client, cfg.judge, "completion")
    if generator.digest == judge.digest:
        warnings.warn(
            f"judge.generator={cfg.generator!r} and judge.judge={cfg.judge!r} are the same model "
            f"(digest {judge.digest[:12]}): a model judging its own answers tends to favour "
            "them (self-preference bias); use a different judge model",
            SelfPreferenceWarning,
            stacklevel=2,
        )
    return JudgeStage(cfg, rubric, Models(client, cfg, rubric), generator, judge)
