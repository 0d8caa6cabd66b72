"""The judge stage of a run: prepare (validate the rubric, the answers and human-verdict
files, and look both models up on the server, before any work), then for every evaluated
case pack the context, answer, judge, verify the evidence quote, apply the rubric's refusal
rule, summarize and, with human verdicts, measure agreement.

Model outputs are cached per (case, packed context hash, chat API and server version,
generator and judge identity: name, served id, digest, listing hash; rubric hash, sampling
settings) in the run's stage cache (stage ``judge``), so a second run over the same contexts
makes no model call.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ragsweep.cache.stage import StageCache
from ragsweep.chunk.chunkers import Chunk
from ragsweep.config.schema import result_fields
from ragsweep.core.hashing import sha256_json
from ragsweep.core.progress import progress_bar
from ragsweep.data.golden import GoldenCase
from ragsweep.eval.scoring import CaseResult
from ragsweep.index.remote.chat import ChatApi, ChatServer
from ragsweep.index.remote.chat_apis import CHAT_APIS
from ragsweep.index.remote.http import RetryPolicy
from ragsweep.judge.agreement import compare, load_human
from ragsweep.judge.answers import FixedAnswers, load_answers
from ragsweep.judge.calls import AnswerSource, FileAnswers, GeneratorModel, ModelOutput, Models
from ragsweep.judge.config import JudgeConfig, Rubric, load_rubric
from ragsweep.judge.context import PackedContext, coverages, pack_context
from ragsweep.judge.results import CaseJudgment, JudgeOutcome, ModelInfo

log = logging.getLogger(__name__)
CACHE_STAGE = "judge"
REFUSAL_RULE = "refusal_on_unanswerable"


class SelfPreferenceWarning(UserWarning):
    """The generator and the judge are the same model: judges favour their own answers."""


@dataclass(frozen=True)
class JudgeStage:
    """A validated, ready judge: config, rubric, the answer source and the judge model as
    the server knows them, the server's version, and the human verdicts (if configured)."""

    cfg: JudgeConfig
    rubric: Rubric
    models: Models
    generator: ModelInfo
    judge: ModelInfo
    server_version: str
    fixed_answers: FixedAnswers | None = None
    human: dict[str, dict[str, Any]] | None = None

    def check_cases(self, cases: Sequence[GoldenCase]) -> None:
        """Fail before any retrieval or model call when fixed answers miss a case."""
        if self.fixed_answers is not None:
            self.fixed_answers.check_covers(c.id for c in cases)

    def run(
        self,
        cases: Sequence[GoldenCase],
        results: Sequence[CaseResult],
        chunks: Sequence[Chunk],
        cache: StageCache,
    ) -> JudgeOutcome:
        """Judge every case from its own retrieved chunks (never the rest of the corpus)."""
        self.check_cases(cases)
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
        records = {j.case_id: j.to_json() for j in judgments}
        return JudgeOutcome(
            judgments=tuple(judgments),
            generator=self.generator,
            judge=self.judge,
            rubric_digest=self.rubric.digest,
            cfg=self.cfg,
            server_version=self.server_version,
            agreement=compare(records, self.human) if self.human is not None else None,
        )

    def outputs(self, case: GoldenCase, packed: PackedContext, cache: StageCache) -> ModelOutput:
        """The models' outputs for one case, from the cache or by calling them."""
        return cache.json_value(
            CACHE_STAGE,
            self.cache_key(case, packed),
            lambda: self.models.run(case, packed),
            ModelOutput.to_json,
            ModelOutput.from_json,
        )

    def cache_key(self, case: GoldenCase, packed: PackedContext) -> str:
        """Everything an output depends on: the case and its context, the server, both
        models' identities, the rubric and the sampling settings."""
        return sha256_json(
            {
                "case": {"id": case.id, "question": case.question},
                "context": packed.digest,
                "server": {"api": self.cfg.api, "version": self.server_version},
                "generator": asdict(self.generator),
                "judge": asdict(self.judge),
                "rubric": self.rubric.digest,
                "temperature": self.cfg.temperature,
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
            invalid=output.invalid,
            output_mode=output.output_mode,
            constrained=output.constrained,
            answer_seconds=output.answer_seconds,
            judge_seconds=output.judge_seconds,
            answer_truncated=output.answer_truncated,
        )


def _evidence_status(quote: str, packed: PackedContext) -> str:
    if not quote.strip():
        return "none"
    return "verified" if packed.contains_quote(quote) else "unverified"


def prepare_judge(cfg: JudgeConfig) -> JudgeStage | None:
    """Check the rubric, the answers and human-verdict files, and that the models exist on
    the server (round trips), before any retrieval work; None when ``judge.enabled`` is
    false."""
    if not cfg.enabled:
        return None
    rubric = load_rubric(cfg.rubric)
    fixed = load_answers(cfg.answers) if cfg.answers else None
    human = load_human(cfg.human) if cfg.human else None
    roles = [cfg.judge] if fixed else [cfg.generator, cfg.judge]
    server = ChatServer(
        cfg.base_url, RetryPolicy.of(cfg), cfg.api_key_env, tuple(dict.fromkeys(roles))
    )
    api = CHAT_APIS.get(cfg.api)(server)
    answers = FileAnswers(fixed) if fixed else _generator(api, cfg, rubric)
    judge = api.describe(cfg.judge)
    version = api.server_version()
    if fixed is None and answers.info.fingerprint == judge.fingerprint:
        warnings.warn(
            f"judge.generator={cfg.generator!r} and judge.judge={cfg.judge!r} are the same model "
            f"({judge.fingerprint[:24]}): a model judging its own answers tends to favour "
            "them (self-preference bias); use a different judge model",
            SelfPreferenceWarning,
            stacklevel=2,
        )
    models = Models(answers, api, judge, cfg, rubric)
    return JudgeStage(cfg, rubric, models, answers.info, judge, version, fixed, human)


def _generator(api: ChatApi, cfg: JudgeConfig, rubric: Rubric) -> AnswerSource:
    return GeneratorModel(api, api.describe(cfg.generator), rubric, cfg)
