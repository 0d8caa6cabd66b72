"""Promotion: re-run a tuning run's exact logged config on the holdout split.

The holdout split is for the release decision only: ``eval.split=holdout`` is refused unless
``eval.allow_holdout=true``, and promotion is the tool that sets it. A promotion

1. reads the tuning run's ``config.yaml`` from the store;
2. refuses when the corpus or golden set on disk no longer hash to the run's
   ``ragsweep.corpus_hash`` / ``ragsweep.golden_digest`` tags (the figures would not be
   comparable);
3. counts the holdout evaluations of the same golden set (runs tagged
   ``ragsweep.stage=holdout`` with the same digest) in the last ``window_days`` and warns
   when this one exceeds ``max_uses``;
4. runs :func:`ragsweep.run.pipeline.run_evaluation` with ``eval.split=holdout`` and tags
   ``ragsweep.stage=holdout``, ``ragsweep.promoted_from=RUN_ID`` and
   ``ragsweep.holdout_evaluations=N`` (this one included), logged to the store the tuning
   run came from, in the tuning run's experiment;
5. attaches ``promotion.md`` (tuning and holdout figures side by side) to the new run.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from ragsweep.config.schema import EvalConfig
from ragsweep.core import tags as tag
from ragsweep.core.errors import ConfigError
from ragsweep.core.names import HOLDOUT, TUNING
from ragsweep.core.terminal import fit_markdown, markdown_table, say
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden import load_golden
from ragsweep.eval.metric_keys import N_ANSWERABLE, by_type_key, type_names
from ragsweep.eval.power import PowerAssumptions, detectable_difference, power_remark
from ragsweep.release.errors import PromotionError
from ragsweep.release.store import LoggedRun, RunStore
from ragsweep.run.config import ResolvedConfig, RunConfig, config_hash, resolve
from ragsweep.run.pipeline import RunResult, run_evaluation
from ragsweep.run.report import metric_columns

DEFAULT_MAX_USES = 5
DEFAULT_WINDOW_DAYS = 30
_DAY_MS = 86_400_000


@dataclass(frozen=True)
class HoldoutUsage:
    """How often the holdout of one golden set has been evaluated in a recent window.

    ``previous`` counts earlier evaluations (runs tagged ``ragsweep.stage=holdout`` with the
    same ``golden_digest``) in the last ``window_days``; ``count`` adds the one being made.
    """

    golden_digest: str
    previous: int
    window_days: int
    max_uses: int

    @property
    def count(self) -> int:
        return self.previous + 1

    @property
    def overused(self) -> bool:
        return self.count > self.max_uses

    def message(self) -> str:
        text = (
            f"holdout of golden set {self.golden_digest[:12]} evaluated {self.count} time(s) "
            f"in the last {self.window_days} days (this one included; limit {self.max_uses})"
        )
        if self.overused:
            text += (
                ": every look at the holdout that feeds a decision turns it into tuning data; "
                "add fresh holdout questions or stop promoting against this set"
            )
        return text


@dataclass(frozen=True)
class Promotion:
    """A promoted run: the tuning run, the holdout evaluation and the side-by-side report."""

    tuning: LoggedRun
    holdout: RunResult
    usage: HoldoutUsage
    report: str


def count_holdout_evaluations(
    store: RunStore, golden_digest: str, window_days: int, now_ms: int
) -> int:
    """Runs tagged ``ragsweep.stage=holdout`` for ``golden_digest`` started in the window
    (every experiment, deleted runs included: the store is the record)."""
    since = now_ms - window_days * _DAY_MS
    return len(
        store.search(
            f"tags.\"{tag.SPLIT}\" = '{HOLDOUT}' "
            f"AND tags.\"{tag.GOLDEN_DIGEST}\" = '{golden_digest}' "
            f"AND attributes.start_time >= {since}"
        )
    )


def holdout_config(
    logged: Mapping[str, Any], tuning: LoggedRun, tracking_uri: str, experiment: str
) -> dict[str, Any]:
    """The logged config with the holdout split switched on, logging to ``tracking_uri``.

    Everything that affects results is kept as logged. The tracking block is rewritten: the
    store is the current one (not whatever the old config named), the run is not nested under
    the tuning run's sweep parent, and the sweep's per-run tags are not carried over.
    """
    config = copy.deepcopy(dict(logged))
    for group in ("eval", "tracking"):
        if not isinstance(config.get(group), dict):
            raise PromotionError(f"config.yaml of run {tuning.run_id} has no {group!r} group")
    config["eval"].update(split=HOLDOUT, allow_holdout=True)
    config["tracking"].update(
        enabled=True,
        uri=tracking_uri,
        experiment=experiment,
        run_name=f"holdout:{tuning.name or tuning.run_id[:8]}",
        parent_run_id=None,
        tags={},
    )
    return config


def check_same_data(cfg: RunConfig, tuning: LoggedRun) -> None:
    """Refuse when the corpus or golden set on disk differ from what the tuning run saw."""
    corpus = load_corpus(cfg.corpus)
    golden = load_golden(cfg.golden, corpus)
    current = {tag.CORPUS_HASH: corpus.content_hash(), tag.GOLDEN_DIGEST: golden.digest}
    sources = {tag.CORPUS_HASH: cfg.corpus.path, tag.GOLDEN_DIGEST: cfg.golden.path}
    for key, value in current.items():
        if tuning.tag(key) != value:
            raise PromotionError(
                f"run {tuning.run_id} was evaluated with {key}={tuning.tag(key)[:12]}…, but "
                f"{sources[key]} now hashes to {value[:12]}…; its figures are not comparable "
                "with a holdout run on today's data. Re-run the tuning evaluation first."
            )


def check_same_config(resolved: ResolvedConfig, tuning: LoggedRun) -> None:
    """Refuse when the logged config no longer means what it meant for the tuning run.

    The config hash covers the embedding model's identity as resolved now (for Ollama: the
    server's digest of the tag), the synonym file's content and every result-affecting value;
    the hash is computed as for the tuning split and must equal the run's tag.
    """
    cfg = resolved.cfg
    as_tuned = dataclasses.replace(
        cfg, eval=dataclasses.replace(cfg.eval, split=TUNING, allow_holdout=False)
    )
    now = config_hash(dataclasses.replace(resolved, cfg=as_tuned))
    model = resolved.model
    if tuning.tag(tag.CONFIG_HASH) != now:
        logged = {
            "model": tuning.tag(tag.EMBEDDING_MODEL),
            "version": tuning.tag(tag.EMBEDDING_VERSION),
            "digest": tuning.tag(tag.EMBEDDING_DIGEST),
        }
        raise PromotionError(
            f"run {tuning.run_id}'s config resolves differently today (config hash "
            f"{tuning.tag(tag.CONFIG_HASH)[:12]}… then, {now[:12]}… now): the embedding model "
            f"was {logged}, now {model.describe()}; or the synonym file or code defaults "
            "changed. Re-run the tuning evaluation, then promote that run."
        )


def prepare(store: RunStore, run_id: str) -> tuple[LoggedRun, ResolvedConfig]:
    """The tuning run and its holdout config, validated and resolved; refuses runs that
    are incomplete or not tuning runs, and logged configs that no longer validate."""
    tuning = store.get(run_id)
    tuning.require_complete()
    if tuning.tag(tag.SPLIT) != TUNING:
        raise PromotionError(
            f"run {run_id} was evaluated on split {tuning.tag(tag.SPLIT)!r}; promotion takes "
            "a tuning run"
        )
    holdout = holdout_config(
        store.config(run_id), tuning, store.uri, store.experiment_name(tuning.experiment_id)
    )
    try:
        return tuning, resolve(holdout)
    except ConfigError as exc:
        raise PromotionError(f"config.yaml of run {run_id} does not validate: {exc}") from exc


def promote(
    store: RunStore,
    run_id: str,
    output_dir: Path,
    max_uses: int = DEFAULT_MAX_USES,
    window_days: int = DEFAULT_WINDOW_DAYS,
    console: Console | None = None,
) -> Promotion:
    """Evaluate tuning run ``run_id``'s config on the holdout split (module docstring).

    ``output_dir`` receives the new run's artifacts; ``console`` the run summary, the usage
    warning and the report.
    """
    console = console or Console(stderr=True)
    tuning, resolved = prepare(store, run_id)
    cfg = resolved.cfg
    check_same_data(cfg, tuning)
    check_same_config(resolved, tuning)
    digest = tuning.tag(tag.GOLDEN_DIGEST)
    previous = count_holdout_evaluations(store, digest, window_days, int(time.time() * 1000))
    usage = HoldoutUsage(digest, previous, window_days, max_uses)
    warning = "warning: " if usage.overused else ""
    say(console, warning + usage.message(), style="bold red" if usage.overused else "")
    result = run_evaluation(
        resolved,
        output_dir,
        console,
        extra_tags={
            tag.PROMOTED_FROM: run_id,
            tag.HOLDOUT_EVALUATIONS: str(usage.count),
        },
    )
    report = render_report(tuning, result, usage, cfg.eval)
    (output_dir / "promotion.md").write_text(report, encoding="utf-8")
    if result.run_id is not None:
        store.log_text(result.run_id, report, "promotion.md")
    return Promotion(tuning=tuning, holdout=result, usage=usage, report=report)


def render_report(
    tuning: LoggedRun, holdout: RunResult, usage: HoldoutUsage, eval_cfg: EvalConfig
) -> str:
    """Markdown: tuning and holdout figures side by side, with holdout − tuning."""
    summary = holdout.summary
    objective = eval_cfg.objective
    overall = [
        _row(m, tuning.metrics.get(m), summary.overall[m])
        for m in metric_columns(summary, eval_cfg)
    ]
    types = sorted({*summary.by_type, *_logged_types(tuning)})
    by_type = [
        _row(
            t,
            tuning.metrics.get(by_type_key(t, objective)),
            summary.by_type.get(t, {}).get(objective),
        )
        for t in types
    ]
    header = [TUNING, HOLDOUT, f"{HOLDOUT} − {TUNING}"]
    lines = [
        f"# Promotion of run `{tuning.run_id}` to the holdout split",
        "",
        f"- **tuning run**: `{tuning.run_id}` ({tuning.name})",
        f"- **holdout run**: `{holdout.run_id or 'not logged'}`",
        f"- **config hash (holdout)**: {holdout.config_hash[:12]}",
        f"- **holdout usage**: {usage.message()}",
        f"- **holdout power**: {holdout_power(summary.counts.get(N_ANSWERABLE, 0))}",
        "",
        "## Overall (mean over answerable cases)",
        "",
        markdown_table(["metric", *header], overall),
        "",
        f"## `{objective}` by question type",
        "",
        markdown_table(["type", *header], by_type),
    ]
    return fit_markdown("\n".join(lines)) + "\n"


def holdout_power(n_answerable: int) -> str:
    """What the holdout can tell apart: the difference its answerable cases detect
    (:mod:`ragsweep.eval.power`), or that it detects none."""
    remark = power_remark(n_answerable, None)
    if remark is not None:
        return remark
    mde = detectable_difference(n_answerable, PowerAssumptions())
    return (
        f"{n_answerable} answerable cases detect a difference of {mde:.3f} or more with 80% "
        "power (ragsweep-golden stats): a tuning gain smaller than that cannot be confirmed "
        "by comparing holdout runs (ragsweep-compare)"
    )


def _logged_types(run: LoggedRun) -> set[str]:
    """Question types with figures in a logged run (``by_type/<segment>/<metric>`` keys,
    renamed types mapped back to their names)."""
    segments = {key.split("/")[1] for key in run.metrics if key.startswith("by_type/")}
    return type_names(run.tags, segments)


def _row(label: str, tuning: float | None, holdout: float | None) -> list[str]:
    def cell(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.4f}"

    gap = "n/a" if tuning is None or holdout is None else f"{holdout - tuning:+.4f}"
    return [label, cell(tuning), cell(holdout), gap]
