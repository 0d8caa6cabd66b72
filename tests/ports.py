"""Ports on 127.0.0.1 for the tests' real servers."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (nothing listens on it now: also
    what a test of an unreachable server connects to)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
