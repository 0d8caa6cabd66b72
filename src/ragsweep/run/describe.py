"""How a run's configuration is spelled on one line: the run name's label
(:func:`ragsweep.run.names.config_label`), the run note's summary
(:func:`ragsweep.run.notes.config_summary`), the ``chunking`` and ``preprocess`` facts of the
terminal summary and ``report.md`` (:func:`ragsweep.run.pipeline.run_facts`) and
``ragsweep check``'s lines all render :func:`config_fields` through :func:`describe`.

Each caller keeps its own template (its wording is part of what users see and of run
names); only the fields, and how each is spelled, live here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragsweep.config.schema import ChunkingConfig
    from ragsweep.run.config import RunConfig

NO_STEPS = "none"
"""What :func:`config_fields` writes for ``steps`` when preprocessing has none."""
CHUNKING = "{mode} size={size} overlap={overlap}"
"""``fixed size=800 overlap=100``: the chunking as the terminal summary, ``report.md`` and
``ragsweep check`` show it."""
STEPS = "{steps}"
"""``nfkc+lowercase`` (or ``none``): the preprocessing as the terminal summary, ``report.md``
and ``ragsweep check`` show it."""


def chunking_fields(c: ChunkingConfig) -> dict[str, object]:
    """``mode``, ``size`` and ``overlap`` of a chunking config."""
    return {"mode": c.mode, "size": c.size, "overlap": c.overlap}


def config_fields(cfg: RunConfig, no_steps: str = NO_STEPS) -> dict[str, object]:
    """The fields a template may name: the chunking's (:func:`chunking_fields`);
    ``preprocess`` (the option name), ``steps`` (``nfkc+lowercase``, or ``no_steps``);
    ``backend`` and ``model_code`` (the configured model in backticks after a space, or
    nothing); ``top_k``; ``split``."""
    model = cfg.embedding.model
    return {
        **chunking_fields(cfg.chunking),
        "preprocess": cfg.preprocess.name,
        "steps": "+".join(cfg.preprocess.steps) or no_steps,
        "backend": cfg.embedding.backend,
        "model_code": f" `{model}`" if model else "",
        "top_k": cfg.top_k,
        "split": cfg.eval.split,
    }


def describe(cfg: RunConfig, template: str, no_steps: str = NO_STEPS) -> str:
    """``template`` (``str.format`` fields of :func:`config_fields`) filled for ``cfg``."""
    return template.format_map(config_fields(cfg, no_steps))
