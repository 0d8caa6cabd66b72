"""A small JSON-over-HTTP client with timeouts and retries, for model servers.

Connection errors, timeouts and 5xx answers are retried with exponential backoff; any other
failure is raised at once. Every error is a :class:`~ragsweep.core.errors.BackendError` whose
message names the URL, the model and what to do about it (``hint``). Request headers (which
may hold an API key) never appear in messages or logs.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragsweep.core.errors import BackendError, ConfigError
from ragsweep.core.secret_keys import masked

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """``timeout``: seconds to wait for a response once connected; ``connect_timeout``:
    seconds to wait for the connection; ``retries``: extra attempts after the first on
    connection errors, timeouts and 5xx; ``backoff``: seconds before the first retry,
    doubled before each further one."""

    timeout: float = 120.0
    connect_timeout: float = 5.0
    retries: int = 3
    backoff: float = 0.5

    def delay(self, retry: int) -> float:
        """Seconds to sleep before retry number ``retry`` (0-based)."""
        return float(self.backoff * 2**retry)

    @classmethod
    def of(cls, options: Any) -> RetryPolicy:
        """The policy of a config object with ``timeout``, ``connect_timeout``, ``retries``
        and ``backoff`` fields (embedding options, the judge)."""
        return cls(options.timeout, options.connect_timeout, options.retries, options.backoff)

    @staticmethod
    def checks(options: Any) -> tuple[tuple[bool, str, str], ...]:
        """``check_all`` entries for those four fields of ``options``."""
        return (
            (options.timeout > 0, "timeout", "> 0 seconds"),
            (options.connect_timeout > 0, "connect_timeout", "> 0 seconds"),
            (options.retries >= 0, "retries", ">= 0"),
            (options.backoff >= 0, "backoff", ">= 0 seconds"),
        )


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def auth_headers(api_key_env: str | None, key: str) -> dict[str, str]:
    """The ``Authorization: Bearer`` header from the environment variable ``api_key_env``
    (none when it is not configured); ``key`` is the config key naming the variable, for the
    error when it is unset. The key itself never leaves the header."""
    if not api_key_env:
        return {}
    if not ENV_NAME.match(api_key_env):  # a key typed instead of its variable's name
        raise ConfigError(
            f"{key}={masked(api_key_env)} is not an environment variable's name (letters, "
            "digits, _); name the variable that holds the key, e.g. OPENAI_API_KEY"
        )
    value = os.environ.get(api_key_env, "")
    if not value:
        raise ConfigError(
            f"{key}={api_key_env!r}, but the environment variable {api_key_env} is not set"
        )
    return {"Authorization": f"Bearer {value}"}


class ServerUnreachable(BackendError):
    """No HTTP answer at all (connection refused, DNS, timeouts) after every retry."""


class HttpStatusError(BackendError):
    """The server answered with an error status; ``status`` is the HTTP code, ``detail``
    the server's own error text."""

    def __init__(self, message: str, status: int, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class JsonClient:
    """JSON requests against one server (``base_url``), with retries.

    ``label`` names the server and model in errors (``"Ollama server (model 'x')"``);
    ``hint`` says what to start when the server cannot be reached.
    """

    def __init__(
        self,
        base_url: str,
        policy: RetryPolicy,
        label: str,
        hint: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.policy = policy
        self.label = label
        self.hint = hint
        import requests  # here, not at module level: only remote backends need it (0.1 s)

        self._session = requests.Session()
        self._session.headers.update(dict(headers or {}))

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def get(self, path: str) -> Any:
        return self.request("GET", path, None)

    def post(self, path: str, payload: Mapping[str, Any]) -> Any:
        return self.request("POST", path, payload)

    def request(self, method: str, path: str, payload: Mapping[str, Any] | None) -> Any:
        """Send one request (retrying transient failures) and return the decoded JSON."""
        import requests

        url = self.url(path)
        for retry in range(self.policy.retries + 1):
            last = retry == self.policy.retries
            try:
                response = self._session.request(
                    method,
                    url,
                    json=payload,
                    timeout=(self.policy.connect_timeout, self.policy.timeout),
                )
            except requests.RequestException as exc:
                if last:
                    attempts = self.policy.retries + 1
                    raise ServerUnreachable(
                        f"cannot reach the {self.label} at {url} ({attempts} "
                        f"attempt{'s' if attempts > 1 else ''}; last error: "
                        f"{type(exc).__name__}). {self.hint}"
                    ) from None
                self._wait(retry, url, type(exc).__name__)
                continue
            if response.status_code >= 500 and not last:
                self._wait(retry, url, f"HTTP {response.status_code}")
                continue
            return self._decode(response, url)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _wait(self, retry: int, url: str, reason: str) -> None:
        delay = self.policy.delay(retry)
        log.warning("%s from %s; retrying in %.2f s", reason, url, delay)
        time.sleep(delay)

    def _decode(self, response: requests.Response, url: str) -> Any:
        if response.status_code >= 400:
            detail = _error_detail(response)
            raise HttpStatusError(
                f"the {self.label} at {url} answered HTTP {response.status_code}: {detail}",
                response.status_code,
                detail,
            )
        try:
            return response.json()
        except ValueError:
            raise BackendError(
                f"the {self.label} at {url} answered with invalid JSON: {response.text[:200]!r}"
            ) from None


def _error_detail(response: requests.Response) -> str:
    """The server's error text: Ollama and OpenAI-style ``{"error": ...}`` or the raw body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason or "no detail"
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            error = error.get("message", error)
        return str(error)[:300]
    return str(body)[:300]
