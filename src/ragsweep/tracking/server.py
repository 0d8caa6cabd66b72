"""A tracking server asked with ``requests``, without MLflow, whether a run may leave opening
it to a logger process (:func:`ragsweep.tracking.ready.experiment_is_ready`), as ``sqlite3``
tells it of a SQLite file:

- ``GET <uri>/health`` (MLflow's server answers ``OK``) within a short timeout. A server
  that refuses the connection (nothing listens there) is a
  :class:`~ragsweep.tracking.store.TrackingStoreError` naming the URI and what to do, raised
  before any work: no path of the run could log to it. One that does not answer within the
  timeout (starting, busy) is not known to be ready, as below.
- ``GET <uri>/api/2.0/mlflow/experiments/get-by-name``: the experiment exists and is
  active (one MLflow would not have to create or refuse).

Any other answer (another status, a TLS or authentication setup that MLflow knows of and
this does not) is "not known to be ready": the run checks the store in its own process with
MLflow, bounded by ``tracking.timeout`` and ``tracking.retries``, as before. The requests
carry what MLflow's client reads from the environment for the common setups: a token or user
and password, and the server certificate settings.

``requests`` is imported when a server is asked: importing it takes ~0.1 s, which a run on
a SQLite store does not pay.
"""

from __future__ import annotations

import os
from typing import Any

from ragsweep.tracking.store import TrackingStoreError

HEALTH_TIMEOUT_SECONDS = 3.0
"""At most this long a server has to connect and to answer each request here (less when
``tracking.timeout`` is less)."""
ACTIVE_STAGE = "active"
"""MLflow's ``lifecycle_stage`` of an experiment that is not deleted."""
EXPERIMENT_BY_NAME = "/api/2.0/mlflow/experiments/get-by-name"


def experiment_ready(uri: str, experiment: str, timeout: float) -> bool:
    """Whether the server at ``uri`` answers its health check and holds ``experiment``,
    active; raises TrackingStoreError when it does not answer (module docstring)."""
    if answers_health(uri, timeout) != 200:
        return False
    return _experiment_stage(uri, experiment, timeout) == ACTIVE_STAGE


def answers_health(uri: str, timeout: float) -> int | None:
    """The HTTP status of ``GET <uri>/health`` (None: no answer within ``timeout``, or a TLS
    failure, which MLflow's own settings may avoid); raises TrackingStoreError when the
    connection is refused."""
    import requests  # here: only a server is asked (module docstring)

    url = uri.rstrip("/") + "/health"
    try:
        return requests.get(url, timeout=(timeout, timeout), **_request_options()).status_code
    except (requests.exceptions.SSLError, requests.Timeout):
        return None  # a slow or busy server: MLflow's own check, with its retries, decides
    except requests.ConnectionError as exc:
        raise TrackingStoreError(
            f"tracking store {uri} did not answer: GET {url} could not connect "
            f"({type(exc).__name__}); is the server running and is "
            "tracking.uri (or MLFLOW_TRACKING_URI) right? Start it (`mlflow server --host "
            "HOST --port PORT`) or point tracking.uri at one that runs; run with "
            "tracking.enabled=false to evaluate without logging. Nothing was run"
        ) from None
    except requests.RequestException:
        return None


def _experiment_stage(uri: str, experiment: str, timeout: float) -> str | None:
    """The ``lifecycle_stage`` of ``experiment`` on the server (None: not found, or an
    answer this does not read)."""
    import requests

    url = uri.rstrip("/") + EXPERIMENT_BY_NAME
    try:
        response = requests.get(
            url,
            params={"experiment_name": experiment},
            timeout=(timeout, timeout),
            **_request_options(),
        )
        found = response.json().get("experiment", {}) if response.status_code == 200 else {}
    except (requests.RequestException, ValueError, AttributeError):
        return None
    stage = found.get("lifecycle_stage") if isinstance(found, dict) else None
    return stage if isinstance(stage, str) else None


def _request_options() -> dict[str, Any]:
    """Authentication and certificate options, from the environment variables MLflow's
    client reads (``MLFLOW_TRACKING_TOKEN``; ``MLFLOW_TRACKING_USERNAME`` and ``_PASSWORD``;
    ``MLFLOW_TRACKING_INSECURE_TLS``, ``MLFLOW_TRACKING_SERVER_CERT_PATH``)."""
    env = os.environ
    options: dict[str, Any] = {}
    if env.get("MLFLOW_TRACKING_TOKEN"):
        options["headers"] = {"Authorization": f"Bearer {env['MLFLOW_TRACKING_TOKEN']}"}
    elif env.get("MLFLOW_TRACKING_USERNAME") and env.get("MLFLOW_TRACKING_PASSWORD"):
        options["auth"] = (env["MLFLOW_TRACKING_USERNAME"], env["MLFLOW_TRACKING_PASSWORD"])
    if env.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() == "true":
        options["verify"] = False
    elif env.get("MLFLOW_TRACKING_SERVER_CERT_PATH"):
        options["verify"] = env["MLFLOW_TRACKING_SERVER_CERT_PATH"]
    return options
