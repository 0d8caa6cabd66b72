"""A team tracking server for the tests, as docs/deploy.md sets it up: a real PostgreSQL from
Debian's packages in a temporary folder, and ``mlflow server`` on it with served artifacts,
both on 127.0.0.1.

- :func:`postgres_bin`: the folder of PostgreSQL's programs, installing Debian's
  ``postgresql`` package (as root, with ``apt-get``) when none is there.
- :class:`PostgresCluster`: ``initdb`` + ``pg_ctl`` on a free port, run as the ``postgres``
  system user when the tests run as root (PostgreSQL refuses to run as root).
- :class:`TeamServer`: ``mlflow server --backend-store-uri postgresql+psycopg://...
  --artifacts-destination DIR`` in a subprocess, up once ``/health`` answers.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

import requests

from tests.ports import free_port

DEBIAN_BINARIES = "/usr/lib/postgresql/*/bin"
INSTALL_SECONDS = 900
START_SECONDS = 300.0
"""``mlflow server`` imports MLflow in each worker: about 70 s on a busy 2-core machine."""
SYSTEM_USER = "postgres"


def _version(initdb: Path) -> tuple[int, ...]:
    """``/usr/lib/postgresql/15/bin/initdb`` → ``(15,)``."""
    return tuple(int(part) for part in initdb.parent.parent.name.split(".") if part.isdigit())


def _installed_bin() -> Path | None:
    found = sorted((Path(p) for p in glob.glob(f"{DEBIAN_BINARIES}/initdb")), key=_version)
    return found[-1].parent if found else None


def postgres_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin``; Debian's ``postgresql`` package is
    installed first when there is none and this process may (root, ``apt-get``). None when
    PostgreSQL is missing and cannot be installed here."""
    found = _installed_bin()
    if found is not None or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "postgresql"]
    for command in (install, ["apt-get", "update", "-q"], install):
        subprocess.run(command, env=env, capture_output=True, timeout=INSTALL_SECONDS)
        if _installed_bin() is not None:
            break
    return _installed_bin()


class PostgresCluster:
    """A PostgreSQL server in a new temporary folder, listening on 127.0.0.1 only.

    Local (socket) connections are trusted, for the administration below; TCP connections
    need a password (``scram-sha-256``), as a team's server would. The folder is under
    ``/tmp`` (pytest's own folders are private to root) and owned by the user the server
    runs as.
    """

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="ragsweep-postgres-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam(SYSTEM_USER)  # KeyError: Debian's package creates it
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", SYSTEM_USER, "--"]

    def _run(self, program: str, *args: str) -> str:
        done = subprocess.run(
            [*self._as_user, str(self.bindir / program), *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.root,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{program} {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done.stdout

    def __enter__(self) -> PostgresCluster:
        try:
            self._run(
                "initdb",
                "--pgdata",
                str(self.data),
                "--username",
                SYSTEM_USER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--no-locale",
            )
            options = (
                f"-c listen_addresses=127.0.0.1 -c port={self.port} "
                f"-c unix_socket_directories={self.root}"
            )
            self._run(
                "pg_ctl",
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-o",
                options,
                "-w",
                "-t",
                "120",
                "start",
            )
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def sql(self, statement: str, database: str = "postgres") -> str:
        """Run ``statement`` as the superuser over the local socket; return psql's output."""
        return self._run(
            "psql",
            "-h",
            str(self.root),
            "-p",
            str(self.port),
            "-U",
            SYSTEM_USER,
            "-d",
            database,
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-c",
            statement,
        )

    def create_database(self, name: str, user: str) -> str:
        """A database ``name`` owned by a new login role ``user`` with a random password;
        returns the SQLAlchemy URL MLflow connects with (psycopg 3, over TCP)."""
        password = secrets.token_hex(12)
        self.sql(f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
        self.sql(f"CREATE DATABASE {name} OWNER {user}")
        return f"postgresql+psycopg://{user}:{password}@127.0.0.1:{self.port}/{name}"

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


class TeamServer:
    """``mlflow server`` on 127.0.0.1 over the database ``backend_uri``, serving artifacts
    stored in ``root/artifacts`` (``--artifacts-destination``)."""

    def __init__(self, root: Path, backend_uri: str, workers: int = 2) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.artifacts = root / "artifacts"
        self.log = root / "mlflow-server.log"
        self.port = free_port()
        self.command = [
            str(Path(sys.executable).parent / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(workers),
            "--backend-store-uri",
            backend_uri,
            "--artifacts-destination",
            str(self.artifacts),
        ]
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> TeamServer:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.log.parent,
                env={**os.environ, "MLFLOW_TRACKING_URI": ""},
                start_new_session=True,  # its own process group: the workers end with it
            )
        try:
            self._wait_until_up()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_until_up(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if requests.get(f"{self.uri}/health", timeout=5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"mlflow server did not come up: {self.log.read_text()[-3000:]}")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()  # mlflow passes SIGTERM on to its uvicorn workers
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
