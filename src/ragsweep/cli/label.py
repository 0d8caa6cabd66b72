"""``ragsweep label [--host HOST] [--port PORT] [OVERRIDES...]``: label a golden set in the
browser (docs/golden.md).

The corpus and the golden set are the ones ``ragsweep OVERRIDES...`` evaluates
(``corpus.path``, ``golden.path``); the golden file need not exist yet (the first case
saved creates it). A golden set inside what ships with ragsweep (the demo set, every
command's default outside a project) is refused before any work: the app would edit the
installed package. The app (:mod:`ragsweep.cli.label_app`) is served by uvicorn on
``HOST:PORT`` (127.0.0.1 by default: nobody else on the network can edit the set) and its
URL printed; Ctrl-C stops it. Port 0 picks a free port (the printed URL says which).

The web stack is Starlette + uvicorn (both BSD-3-Clause): MLflow, which ragsweep depends
on, already installs both, so the app adds no package to an installation; Starlette is a
small, well-maintained ASGI toolkit with static files and JSON routes and nothing else.
The page is plain HTML, CSS and JavaScript shipped in the package: no build step, no CDN.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

import uvicorn

from ragsweep.cli.errors import reported_errors
from ragsweep.cli.label_app import build_app
from ragsweep.cli.label_state import LabelProject
from ragsweep.config.app import compose, plain_config, refuse_bundled_write
from ragsweep.config.schema import CorpusConfig, GoldenConfig, from_mapping
from ragsweep.core.errors import RagsweepError
from ragsweep.data.corpus import load_corpus
from ragsweep.data.golden_file import drafts_path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
EXIT_ERROR = 2


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ragsweep label",
        description="Label the project's golden set in the browser; prints the app's URL.",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"default {DEFAULT_HOST}")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT} (0: any free port)"
    )
    parser.add_argument(
        "overrides", nargs="*", help="config overrides, as for ragsweep (golden.path=...)"
    )
    return parser.parse_args(list(argv))


def load_project(overrides: Sequence[str]) -> LabelProject:
    """The configured corpus (loaded) and golden set config; a golden set that ships with
    ragsweep (the default outside a project) is refused before the corpus is read."""
    with reported_errors():
        config = plain_config(compose(overrides))
    golden = Path(config["golden"]["path"])
    for path in (golden, drafts_path(golden)):
        refuse_bundled_write(path, "pass golden.path=FILE (and corpus.path=DIR) to label.")
    corpus = load_corpus(from_mapping(CorpusConfig, config["corpus"], "corpus"))
    return LabelProject(corpus, from_mapping(GoldenConfig, config["golden"], "golden"))


def main(argv: Sequence[str]) -> int:
    """Serve the app until interrupted (see the module docstring)."""
    args = _parse(argv)
    try:
        project = load_project(args.overrides)
    except RagsweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        print(
            f"error: cannot listen on {args.host}:{args.port} ({exc.strerror}); pass --port",
            file=sys.stderr,
        )
        return EXIT_ERROR
    port = sock.getsockname()[1]
    print(f"{len(project.corpus)} documents; golden set {project.golden_path}", flush=True)
    print(f"Label app: http://{args.host}:{port}/  (Ctrl-C stops it)", flush=True)
    config = uvicorn.Config(build_app(project), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])
    return 0
