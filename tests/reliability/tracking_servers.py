"""Real HTTP endpoints on 127.0.0.1 for the tracking-store tests.

- :class:`SilentServer`: accepts TCP connections and never answers (a hung server).
- :func:`closed_port`: a port nothing listens on (a server that is down).
- :class:`MlflowServer`: MLflow's own tracking server (its Flask app, the one ``mlflow
  server`` runs, served by werkzeug) in a subprocess, over a real SQLite store.
- :class:`HoldingProxy`: forwards every request to a server, except that requests whose
  path ends with one of ``hold`` are accepted and never answered (a server that fails in
  the middle of a run: it answered the store check, then hangs on logging).
"""

from __future__ import annotations

import http.client
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.ports import free_port

SERVER_SCRIPT = """
import os, sys
os.environ["_MLFLOW_SERVER_FILE_STORE"] = sys.argv[1]
os.environ["_MLFLOW_SERVER_ARTIFACT_ROOT"] = sys.argv[2]
os.environ["_MLFLOW_SERVER_SERVE_ARTIFACTS"] = "false"
from werkzeug.serving import make_server
from mlflow.server import app
server = make_server("127.0.0.1", 0, app, threaded=True)
print(server.server_port, flush=True)
server.serve_forever()
"""
START_SECONDS = 120.0


def closed_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago and has no listener now."""
    return free_port()


class SilentServer:
    """Listens on 127.0.0.1, accepts every connection, reads nothing and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            self.accepted.append(conn)

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


class MlflowServer:
    """MLflow's tracking server in a subprocess on 127.0.0.1 over ``store`` (a SQLite file,
    copied from ``template`` when given, so the schema need not be created)."""

    def __init__(self, root: Path, template: Path | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.store = root / "server.db"
        if template is not None:
            shutil.copyfile(template, self.store)
        self.artifacts = root / "server-artifacts"
        self.log = root / "server.log"
        self.process: subprocess.Popen[str] | None = None
        self.port = 0

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> MlflowServer:
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    SERVER_SCRIPT,
                    f"sqlite:///{self.store}",
                    self.artifacts.as_uri(),
                ],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, "MLFLOW_TRACKING_URI": ""},
            )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], START_SECONDS)
        line = self.process.stdout.readline() if ready else ""  # the port, once it listens
        if not line.strip().isdigit():
            self.__exit__(None, None, None)
            raise RuntimeError(f"the MLflow server did not start: {self.log.read_text()[-2000:]}")
        self.port = int(line)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            if self.process.stdout is not None:
                self.process.stdout.close()


class HoldingProxy:
    """An HTTP proxy on 127.0.0.1 in front of ``target`` (``http://host:port``) that holds
    requests whose path ends with any of ``hold``: accepted, never answered."""

    def __init__(self, target: str, hold: tuple[str, ...]) -> None:
        self.target = target.removeprefix("http://")
        self.hold = hold
        self.held: list[str] = []
        self.released = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.split("?")[0].endswith(proxy.hold):
                    proxy.held.append(self.path)
                    proxy.released.wait()  # hold the connection until the test ends
                    return
                host, _, port = proxy.target.partition(":")
                upstream = http.client.HTTPConnection(host, int(port), timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                upstream.request(self.command, self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                upstream.close()

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _forward

        return Handler

    def __enter__(self) -> HoldingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
