"""The resident logger: one long-lived ``ragsweep-log --resident`` per user and setup.

Each logger a command starts (:mod:`ragsweep.tracking.background`) pays for importing MLflow
and opening its SQLite store again, about 2.4 s, more than a warm run. With
``tracking.resident`` on, the command opens a session with a logger that outlives it
instead: a process listening on a Unix socket in a private folder (:func:`private_folder`),
started detached by the first command that finds none (:func:`connect`). Each connection
is one session of the logger's own protocol (:func:`ragsweep.tracking.logger.serve_session`,
in a thread; the requests themselves are done one at a time). The socket's name is a digest
of everything that makes a long-lived process wrong for a new command (:func:`resident_key`),
so a changed interpreter, version, source file, working directory, ``MLFLOW_*`` or
``RAGSWEEP_*`` variable or store credential starts another one. It prints what it logged to
its log file beside the socket, and exits after ``tracking.resident_idle_seconds`` without a
session, or at once when its socket file is removed or replaced (that is how to stop it).
Its lock file, held while it lives, keeps a second one started at the same time from
taking the socket over. A store file replaced between sessions is reopened
(:func:`ragsweep.tracking.store.open_client`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import IO, Any

import ragsweep
from ragsweep.core import locks
from ragsweep.tracking.logger import COMMAND, LOGGING, serve_session
from ragsweep.tracking.store import (
    HTTP_SETTINGS_ENV,
    PROGRESS_BAR_ENV,
    file_identity,
    forget_experiments,
)

START_SECONDS = 10.0
"""How long a command waits for the resident logger it started to listen."""
TICK_SECONDS = 0.5
"""How often the resident logger checks its socket file and its idle time."""
KEYED_ENV_PREFIXES = ("MLFLOW_", "RAGSWEEP_", "AWS_", "GOOGLE_", "CLOUDSDK_", "AZURE_")
"""Variables that change where and how a run is logged: MLflow's and ragsweep's own, and
the credentials of the artifact stores MLflow writes to (S3, GCS and the gcloud
configuration its default credentials come from, Azure)."""
KEYED_ENV_NETWORK = (
    "_PROXY",
    "REQUESTS_CA_BUNDLE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
)
"""Name endings (upper-cased) of the proxy and certificate variables ``requests`` and
OpenSSL read."""
KEYED_ENV_NAMES = frozenset({"HOME", "NETRC", "KRB5CCNAME"})
"""Where credential files are found: the home folder (``~/.aws/credentials``, gcloud's
configuration, ``~/.netrc``), ``requests``' netrc and the Kerberos ticket cache (HDFS)."""
UNKEYED_ENV = frozenset({*HTTP_SETTINGS_ENV, PROGRESS_BAR_ENV})
"""``MLFLOW_*`` variables ragsweep sets in its own process (from a store's tracking settings,
and for its own standard error), left out of the key: a command that has opened a store
before starting its logger (a sweep file's) finds the logger of one that has not (a single
run's), and the logger sets them itself when it opens a session's store."""
FOLDER_NAME = "ragsweep"
UCRED = "iII"
"""Linux's ``struct ucred`` (``SO_PEERCRED``): a signed ``pid_t``, an unsigned ``uid_t`` and
``gid_t`` (a user id over 2^31 read as signed would never equal :func:`os.getuid`)."""
SALT_FILE = "salt"
"""In the private folder: this user's random secret, which the key digests too."""


class ResidentRefused(OSError):
    """The resident logger cannot be used here (the reason is the message)."""


@dataclass(frozen=True)
class Place:
    """The files of one resident logger: its socket, lock, process id and log."""

    socket: Path
    lock: Path
    pid: Path
    log: Path

    @classmethod
    def of(cls, folder: Path, key: str) -> Place:
        """The files of the logger keyed ``key`` in ``folder``."""
        stem = folder / f"r-{key}"
        return cls(*(stem.with_suffix(s) for s in (".sock", ".lock", ".pid", ".log")))


def private_folder() -> Path:
    """``$XDG_RUNTIME_DIR/ragsweep``, else ``/tmp/ragsweep-<uid>``, created mode 0700.
    Raises ResidentRefused when it is not a folder of this user's that only this user can
    enter (another user could then talk to, or stand in for, the logger)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(runtime) / FOLDER_NAME if runtime else Path(f"/tmp/ragsweep-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ResidentRefused(f"{folder} is not a folder of this user's")
    if info.st_mode & 0o077:
        raise ResidentRefused(f"{folder} is open to other users (mode {info.st_mode & 0o777:o})")
    return folder


def user_salt(folder: Path) -> str:
    """This user's random secret in the private ``folder``, made by the first command that
    needs it: the key digests it too, so the key (in the socket's name, which every user
    can list in ``/proc/net/unix``, and on the logger's command line) cannot be used to
    check guesses at the environment it digests (an ``MLFLOW_TRACKING_PASSWORD``)."""
    salt = folder / SALT_FILE
    if not salt.exists():
        made = folder / f".{SALT_FILE}-{os.getpid()}-{threading.get_ident()}"
        made.write_text(secrets.token_hex(16), encoding="utf-8")
        with contextlib.suppress(FileExistsError):
            os.link(made, salt)  # whole, and the first one made is the one kept
        made.unlink()
    return salt.read_text(encoding="utf-8")


def keyed_variable(name: str) -> bool:
    """Whether environment variable ``name`` enters :func:`resident_key`."""
    if name in UNKEYED_ENV:
        return False
    if name in KEYED_ENV_NAMES or name.startswith(KEYED_ENV_PREFIXES):
        return True
    return name.upper().endswith(KEYED_ENV_NETWORK)


def resident_key(folder: Path) -> str:
    """A digest of what a long-lived logger must share with a command: the interpreter,
    ragsweep's and MLflow's versions, the size and time of every ragsweep source file (an
    editable install changes without a new version), the working directory (a relative
    store or artifact path in a run's record is read in the logger's) and the
    environment that changes how a run is logged (:func:`keyed_variable`: ``MLFLOW_*``,
    ``RAGSWEEP_*``, artifact-store credentials and the folders they are read from, proxies
    and certificates; hashed with the rest, never written anywhere), with the
    :func:`user_salt` of ``folder``."""
    try:
        mlflow_version = version("mlflow")
    except PackageNotFoundError:
        mlflow_version = None
    package = Path(ragsweep.__file__).parent
    sources = sorted(
        (str(p.relative_to(package)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in package.rglob("*.py")
    )
    env = sorted((k, v) for k, v in os.environ.items() if keyed_variable(k))
    setup = [sys.executable, str(package), ragsweep.__version__, mlflow_version, sources]
    facts = [*setup, os.getcwd(), env, user_salt(folder)]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]


# -- a command's side ----------------------------------------------------------------------


def connect(idle_seconds: int) -> tuple[socket.socket, Place]:
    """A connection to the resident logger of this setup, started first (detached, its
    output in its log) when none answers; waits at most :data:`START_SECONDS` for it.
    Raises OSError (ResidentRefused saying why) when it cannot be used."""
    folder = private_folder()
    key = resident_key(folder)
    place = Place.of(folder, key)
    connection = _connected(place)
    if connection is not None:
        return connection, place
    with place.log.open("a", encoding="utf-8") as log:
        process = subprocess.Popen(
            [*COMMAND, "--resident", f"--idle-seconds={idle_seconds}", f"--key={key}"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline and process.poll() in (None, 0):  # 0: another one won
        time.sleep(0.05)
        connection = _connected(place)
        if connection is not None:
            return connection, place
    if process.returncode:
        raise ResidentRefused(f"the resident logger failed (its log: {place.log})")
    raise ResidentRefused(f"the resident logger did not listen within {START_SECONDS:.0f} s")


def _connected(place: Place) -> socket.socket | None:
    """A connection to ``place``'s socket; None when no logger listens there."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(str(place.socket))
    except (FileNotFoundError, ConnectionRefusedError):
        connection.close()
        return None
    except OSError:
        connection.close()
        raise
    return connection


class Connection:
    """The transport to the resident logger (module docstring): one
    session over its socket, which outlives the session."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self._requests = connection.makefile("w", encoding="utf-8")

    def send(self, requests: Iterable[dict[str, Any]]) -> bool:
        """Write request lines; False when the logger is gone."""
        try:
            for request in requests:
                self._requests.write(json.dumps(request) + "\n")
            self._requests.flush()
        except (OSError, ValueError):
            return False
        return True

    def close(self) -> None:
        """Nothing more to send: the session ends once its answers are read."""
        try:
            self._requests.close()
            self.connection.shutdown(socket.SHUT_WR)
        except OSError:  # already gone
            pass
        self.connection.close()  # the reader's end stays open until it has read all

    def wait(self) -> None:
        """Nothing to wait for: the logger lives on."""


# -- the logger's side ---------------------------------------------------------------------


def serve_resident(idle_seconds: int, key: str) -> int:
    """``ragsweep-log --resident``: listen on this setup's socket and serve each connection
    as a session (module docstring) until idle for ``idle_seconds`` or the socket file is
    gone. Exits with status 0 when another one holds the lock for :data:`START_SECONDS` (it
    listens: the command connects to it meanwhile), and at once with 1 when this process's
    setup is not the ``key`` of the command that started it (it imported other code: the
    command does not wait for it)."""
    folder = private_folder()
    if key != resident_key(folder):
        print(f"not started: this process's setup is not {key}'s", flush=True)
        return 1
    place = Place.of(folder, key)
    with place.lock.open("a") as lock:
        try:
            locks.acquire(lock, wait_seconds=START_SECONDS)  # one stopping lets go soon
        except locks.LockTimeout:
            return 0  # another one started first and listens
        place.socket.unlink(missing_ok=True)  # a killed logger's
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(place.socket))
        listener.listen()
        listener.settimeout(TICK_SECONDS)
        place.pid.write_text(f"{os.getpid()}\n", encoding="utf-8")
        print(f"listening on {place.socket} (process {os.getpid()})", flush=True)
        try:
            _accept(listener, place, idle_seconds)
        finally:
            place.pid.unlink(missing_ok=True)
        with LOGGING:  # no run is left half-logged
            print("exiting", flush=True)
            return 0


class _Sessions:
    """How many sessions are open, and since when none is."""

    def __init__(self) -> None:
        self.open = 0
        self.idle_since = time.monotonic()
        self._lock = threading.Lock()

    def add(self, change: int) -> None:
        with self._lock:
            self.open += change
            self.idle_since = time.monotonic()


def _accept(listener: socket.socket, place: Place, idle_seconds: int) -> None:
    """Accept sessions until idle or the socket file is not ours any more; then remove it
    if it still is. ``kill`` (SIGTERM) removes it: the logger stops as it does then, once
    the request it is doing is done."""
    bound = file_identity(place.socket)
    signal.signal(signal.SIGTERM, lambda *_: place.socket.unlink(missing_ok=True))
    sessions = _Sessions()
    while file_identity(place.socket) == bound:
        if not sessions.open and time.monotonic() - sessions.idle_since >= idle_seconds:
            place.socket.unlink(missing_ok=True)
            return
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        connection.settimeout(None)
        sessions.add(1)
        threading.Thread(target=_session, args=(connection, sessions), daemon=True).start()


def _session(connection: socket.socket, sessions: _Sessions) -> None:
    """One session: the logger's protocol over ``connection``, from a process of this user
    only (the private folder already keeps others out)."""
    requests: IO[Any] = connection.makefile("r", encoding="utf-8")
    answers: IO[Any] = connection.makefile("w", encoding="utf-8")
    try:
        if _peer_uid(connection) == os.getuid():
            with LOGGING:  # experiments found by an earlier session: looked up again
                forget_experiments()
            serve_session(requests, answers)
    except (OSError, ValueError) as exc:  # the command went away mid-line
        print(f"a session ended early: {exc}", flush=True)
    finally:
        for stream in (requests, answers):
            with contextlib.suppress(OSError):
                stream.close()
        connection.close()
        sessions.add(-1)


def _peer_uid(connection: socket.socket) -> int:
    """The user id of the process at the other end (Linux's ``SO_PEERCRED``; elsewhere
    the folder's permissions alone)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return os.getuid()
    credentials = connection.getsockopt(socket.SOL_SOCKET, option, struct.calcsize(UCRED))
    return int(struct.unpack(UCRED, credentials)[1])
