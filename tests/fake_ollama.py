"""A real HTTP server on 127.0.0.1 that speaks the parts of the Ollama and OpenAI APIs
ragsweep uses (``/api/tags``, ``/api/show``, ``/api/version``, ``/api/embed``, ``/api/chat``,
``/v1/models``, ``/v1/embeddings``, ``/v1/chat/completions``, ``/version``), with scripted
answers and a log of every request.

No model is involved: embeddings are hashed character trigrams of the text (similar texts
get similar vectors), and chat answers come from ``FakeModelServer.chat``, a function of
the request body (by default :func:`extractive_chat`) that returns the text, or the text
and a finish reason (``"length"``: cut at the token cap).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIMENSION = 64
REFUSAL = "The documents do not say."


def fake_embedding(text: str, dimension: int = DIMENSION) -> list[float]:
    """Counts of the text's lowercased character trigrams, hashed into ``dimension`` bins."""
    vector = [0.0] * dimension
    padded = f"  {text.lower()} "
    for i in range(len(padded) - 2):
        digest = hashlib.blake2b(padded[i : i + 3].encode("utf-8"), digest_size=4).digest()
        vector[int.from_bytes(digest, "little") % dimension] += 1.0
    return vector


@dataclass
class FakeModel:
    name: str
    digest: str
    capabilities: tuple[str, ...] = ("embedding",)
    dimension: int = DIMENSION


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    body: Any
    headers: dict[str, str]


Reply = tuple[int, Any]
Intercept = Callable[[Recorded], Reply | None]
ChatScript = Callable[[dict[str, Any]], "str | tuple[str, str]"]
RESPONSE_FORMATS = frozenset({"json_schema", "json_object", "text"})


def full_name(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


@dataclass
class FakeModelServer:
    """Scripted model server. ``intercept`` may answer any request before normal service
    (return ``(status, json_body)``, or None to fall through)."""

    models: dict[str, FakeModel] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    intercepts: list[Intercept] = field(default_factory=list)
    chat: ChatScript = field(default=lambda body: extractive_chat(body))
    api_key: str | None = None
    response_formats: frozenset[str] = RESPONSE_FORMATS
    """``response_format`` types ``/v1/chat/completions`` accepts (others: HTTP 422)."""
    list_openai_models: bool = True
    version: str = "0.9.0-fake"
    _created: itertools.count[int] = field(default_factory=lambda: itertools.count(1_700_000_000))

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._http = _QuietServer(("127.0.0.1", 0), _Handler)
        self._http.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    # --- scripting -----------------------------------------------------------------------

    def add_model(
        self, name: str, digest: str, *capabilities: str, dimension: int = DIMENSION
    ) -> None:
        """Install a model (default capability: embedding); re-adding replaces it."""
        model = FakeModel(name, digest, capabilities or ("embedding",), dimension)
        self.models[full_name(name)] = model

    def fail(self, path: str, *statuses: int) -> None:
        """Answer the next requests to ``path`` with these statuses, in order."""
        pending = list(statuses)

        def intercept(request: Recorded) -> Reply | None:
            if request.path == path and pending:
                return pending.pop(0), {"error": "scripted failure"}
            return None

        self.intercepts.append(intercept)

    def calls(self, path: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    # --- service -------------------------------------------------------------------------

    def handle(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
        for intercept in self.intercepts:
            reply = intercept(request)
            if reply is not None:
                return reply
        routes: dict[tuple[str, str], Callable[[Recorded], Reply]] = {
            ("GET", "/api/tags"): self._tags,
            ("POST", "/api/show"): self._show,
            ("GET", "/api/version"): lambda r: (200, {"version": self.version}),
            ("POST", "/api/embed"): self._embed,
            ("POST", "/api/chat"): self._chat,
            ("GET", "/v1/models"): self._openai_models,
            ("POST", "/v1/embeddings"): self._openai_embeddings,
            ("POST", "/v1/chat/completions"): self._openai_chat,
            ("GET", "/version"): lambda r: (200, {"version": self.version}),
        }
        route = routes.get((request.method, request.path))
        return route(request) if route else (404, {"error": "404 page not found"})

    def _model(self, name: str) -> FakeModel | None:
        return self.models.get(full_name(name))

    def _tags(self, request: Recorded) -> Reply:
        listed = [
            {"name": key, "model": key, "digest": m.digest, "size": 1, "details": {}}
            for key, m in self.models.items()
        ]
        return 200, {"models": listed}

    def _show(self, request: Recorded) -> Reply:
        model = self._model(request.body.get("model", ""))
        if model is None:
            return 404, {"error": f"model '{request.body.get('model')}' not found"}
        return 200, {"details": {"family": "fake"}, "capabilities": list(model.capabilities)}

    def _embed(self, request: Recorded) -> Reply:
        model = self._model(request.body.get("model", ""))
        if model is None:
            return 404, {"error": "model not found, try pulling it first"}
        texts = request.body["input"]
        texts = [texts] if isinstance(texts, str) else texts
        return 200, {
            "model": model.name,
            "embeddings": [fake_embedding(t, model.dimension) for t in texts],
        }

    def _chat(self, request: Recorded) -> Reply:
        model = self._model(request.body.get("model", ""))
        if model is None:
            return 404, {"error": f"model '{request.body.get('model')}' not found"}
        content, finish = _scripted(self.chat(request.body))
        return 200, {
            "model": model.name,
            "message": {"role": "assistant", "content": content},
            "done": True,
            "done_reason": finish,
        }

    def _unauthorized(self, request: Recorded) -> Reply | None:
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return 401, {"error": {"message": "Incorrect API key provided"}}
        return None

    def _openai_models(self, request: Recorded) -> Reply:
        if not self.list_openai_models:
            return 404, {"error": "not found"}
        denied = self._unauthorized(request)
        if denied:
            return denied
        data = [
            {"id": m.name, "object": "model", "created": next(self._created), "owned_by": "fake"}
            for m in self.models.values()
        ]
        return 200, {"object": "list", "data": data}

    def _openai_embeddings(self, request: Recorded) -> Reply:
        denied = self._unauthorized(request)
        if denied:
            return denied
        wanted = request.body.get("model")
        model = next((m for m in self.models.values() if m.name == wanted), None)
        if model is None:
            return 404, {"error": {"message": f"model {request.body.get('model')} not found"}}
        rows = [
            {"object": "embedding", "index": i, "embedding": fake_embedding(t, model.dimension)}
            for i, t in enumerate(request.body["input"])
        ]
        return 200, {"object": "list", "data": rows[::-1], "model": model.name}  # any order

    def _openai_chat(self, request: Recorded) -> Reply:
        denied = self._unauthorized(request)
        if denied:
            return denied
        wanted = request.body.get("model")
        model = next((m for m in self.models.values() if m.name == wanted), None)
        if model is None:
            return 404, {"error": {"message": f"model {wanted} not found"}}
        kind = (request.body.get("response_format") or {}).get("type")
        if kind is not None and kind not in self.response_formats:
            return 422, {"error": {"message": f"response_format.type {kind!r} is not supported"}}
        content, finish = _scripted(self.chat(request.body))
        choice = {"index": 0, "message": {"role": "assistant", "content": content}}
        return 200, {
            "object": "chat.completion",
            "model": model.name,
            "choices": [{**choice, "finish_reason": finish}],
        }


def _scripted(reply: str | tuple[str, str]) -> tuple[str, str]:
    return (reply, "stop") if isinstance(reply, str) else reply


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a scripted dropped connection is not worth a traceback


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, delayed ACKs add ~40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        request = Recorded(method, self.path, body, dict(self.headers.items()))
        status, payload = self.server.fake.handle(request)  # type: ignore[attr-defined]
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


# --- scripted chat models --------------------------------------------------------------


JUDGE_MARK = "\n\nReply with the JSON object only."


def first_user_message(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def is_judge_request(body: dict[str, Any]) -> bool:
    """Whether a chat request (either API, any output mode) asks the judge for a verdict."""
    return first_user_message(body).endswith(JUDGE_MARK)


def judge_parts(body: dict[str, Any]) -> tuple[str, str, str]:
    """(question, context, answer) from a judge request's first user message."""
    text = first_user_message(body)
    match = re.search(r"Question:\n(.*)\n\nContext:\n(.*)\n\nAnswer:\n(.*)\n\nReply", text, re.S)
    assert match, text
    return match.group(1), match.group(2), match.group(3)


def generator_parts(body: dict[str, Any]) -> tuple[str, str]:
    """(question, context) from a generator request."""
    text = first_user_message(body)
    context, question = text.split("Context:\n", 1)[1].rsplit("\n\nQuestion: ", 1)
    return question, context


def passage_texts(context: str) -> list[str]:
    """The chunk texts of a rendered context (header lines dropped)."""
    blocks = [b for b in context.split("\n\n[") if b.strip()]
    return [b.split("\n", 1)[1] if "\n" in b else "" for b in blocks]


def extractive_chat(body: dict[str, Any]) -> str:
    """Generator: the last line of the first passage sharing a word (4+ letters) with the
    question, else a refusal. Judge: 2/2 with the answer as evidence, or a 2/2 refusal."""
    if is_judge_request(body):
        _, _, answer = judge_parts(body)
        refusal = answer == REFUSAL
        return verdict(2, 2, refusal=refusal, evidence="" if refusal else answer)
    question, context = generator_parts(body)
    words = {w.lower() for w in re.findall(r"\w{4,}", question)}
    for passage in passage_texts(context):
        if words & {w.lower() for w in re.findall(r"\w{4,}", passage)}:
            return passage.strip().splitlines()[-1]
    return REFUSAL


def verdict(
    faithfulness: Any, relevance: Any, refusal: bool = False, evidence: str = "", note: str = "ok"
) -> str:
    return json.dumps(
        {
            "faithfulness": faithfulness,
            "relevance": relevance,
            "refusal": refusal,
            "evidence": evidence,
            "note": note,
        }
    )
