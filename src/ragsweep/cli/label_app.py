"""The web app of ``ragsweep label``: a Starlette application over one corpus and golden set.

Routes (JSON unless said otherwise; every change carries the digest of the file it was
made against, and a file changed on disk meanwhile answers 409 with nothing written):

- ``GET /``: the page; ``GET /static/...``: its script and style, served from the package
  (``ragsweep/_data/label/``): nothing is fetched from elsewhere, so it works offline;
- ``GET /api/state``: every case and draft as checked, the counts and detectable differences;
- ``GET /api/docs?q=...``: documents (id, title, length), those holding ``q`` with a snippet;
- ``GET /api/doc/{id}``: a document's text (as loaded: evidence offsets index into it);
- ``GET /api/quote?doc=...&q=...``: where a quote matches (as the loader matches quotes);
- ``POST /api/case``: save the form as a case (``replaces``: the id of the case it edits);
- ``POST /api/delete``: delete a case;
- ``POST /api/accept``, ``POST /api/reject``: the review queue of drafts (an accepted draft
  is saved as the form says, with ``origin: drafted``, and leaves the drafts file).

A problem with the input answers 422 with the loader's message; the page shows it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ragsweep.cli.label_state import (
    LabelProject,
    draft_record,
    labelled_record,
    search,
    state,
)
from ragsweep.core.errors import GoldenError
from ragsweep.data.closest import describe_closest
from ragsweep.data.golden import parse_case
from ragsweep.data.golden_file import (
    GoldenConflictError,
    delete_case,
    read_golden_file,
    save_case,
)
from ragsweep.data.golden_lines import Where
from ragsweep.data.quotes import quote_matches

ASSETS_PACKAGE = "ragsweep._data"
ASSETS_DIR = "label"
CONFLICT = 409
UNPROCESSABLE = 422

Handler = Callable[[Request], Awaitable[Response]]


def assets_dir() -> Path:
    """The folder of the page, script and style (package data of the wheel)."""
    return Path(str(files(ASSETS_PACKAGE).joinpath(ASSETS_DIR)))


def build_app(project: LabelProject) -> Starlette:
    """The app over ``project`` (corpus loaded once; the golden files read on each request,
    so edits made on disk show on reload)."""
    api = _Api(project)
    routes = [
        Route("/", lambda _request: FileResponse(assets_dir() / "index.html")),
        Route("/api/state", api.state),
        Route("/api/docs", api.docs),
        Route("/api/doc/{doc_id:path}", api.doc),
        Route("/api/quote", api.quote),
        Route("/api/case", _reported(api.save), methods=["POST"]),
        Route("/api/delete", _reported(api.delete), methods=["POST"]),
        Route("/api/accept", _reported(api.accept), methods=["POST"]),
        Route("/api/reject", _reported(api.reject), methods=["POST"]),
        Mount("/static", StaticFiles(directory=assets_dir()), name="static"),
    ]
    return Starlette(routes=routes)


def _reported(handler: Handler) -> Handler:
    """``handler`` with a refused change answered as JSON ``{"error": ...}``: 409 when the
    file changed on disk, 422 for anything the loader rejects."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except GoldenConflictError as exc:
            return JSONResponse({"error": str(exc), "conflict": True}, status_code=CONFLICT)
        except (GoldenError, KeyError, TypeError, ValueError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=UNPROCESSABLE)

    return wrapped


class _Api:
    """The handlers, over one project."""

    def __init__(self, project: LabelProject) -> None:
        self.project = project

    async def state(self, _request: Request) -> Response:
        return JSONResponse(state(self.project))

    async def docs(self, request: Request) -> Response:
        return JSONResponse(search(self.project.corpus, request.query_params.get("q", "")))

    async def doc(self, request: Request) -> Response:
        doc_id = request.path_params["doc_id"]
        if doc_id not in self.project.corpus:
            return JSONResponse({"error": f"no document {doc_id!r}"}, status_code=404)
        doc = self.project.corpus.get(doc_id)
        return JSONResponse({"id": doc.id, "title": doc.title, "text": doc.text})

    async def quote(self, request: Request) -> Response:
        doc_id, quote = request.query_params.get("doc", ""), request.query_params.get("q", "")
        if doc_id not in self.project.corpus or not quote.strip():
            return JSONResponse({"matches": [], "problem": "pick a document and type a quote"})
        text = self.project.corpus.get(doc_id).text
        matches = quote_matches(text, quote)
        problem = None if matches else f"not found; {describe_closest(text, quote)}"
        return JSONResponse({"matches": matches, "problem": problem})

    async def save(self, request: Request) -> Response:
        body = await request.json()
        path = self.project.golden_path
        record = self._checked(path, body["form"])
        save_case(path, body["digest"], record, body.get("replaces") or None)
        return JSONResponse({"saved": record["id"], **state(self.project)})

    async def delete(self, request: Request) -> Response:
        body = await request.json()
        delete_case(self.project.golden_path, body["digest"], body["id"])
        return JSONResponse(state(self.project))

    async def accept(self, request: Request) -> Response:
        body = await request.json()
        path, drafts = self.project.golden_path, self.project.drafts_path
        draft_digest = read_golden_file(drafts).digest
        if draft_digest != body["drafts_digest"]:
            raise GoldenConflictError(f"{drafts} changed on disk since it was loaded; reload")
        record = draft_record(self._checked(path, body["form"]))
        save_case(path, body["digest"], record, None)
        delete_case(drafts, draft_digest, body["draft"])
        return JSONResponse({"saved": record["id"], **state(self.project)})

    async def reject(self, request: Request) -> Response:
        body = await request.json()
        delete_case(self.project.drafts_path, body["drafts_digest"], body["draft"])
        return JSONResponse(state(self.project))

    def _checked(self, path: Path, form: dict[str, Any]) -> dict[str, Any]:
        """The form as a golden record, validated as the loader validates it."""
        existing = [line.case_id or "" for line in read_golden_file(path).records()]
        record = labelled_record(self.project.corpus, form, existing)
        where = Where(f"{path} (not saved)", len(existing) + 1, record["id"])
        parse_case(record, where, self.project.golden.holdout_fraction, self.project.corpus)
        return record
