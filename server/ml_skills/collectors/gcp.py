"""Calling Google Cloud read APIs: one deadline, bounded retries, and one-line errors.

Vertex AI and Cloud Logging fail the same ways (401/403/404, 429 with Retry-After, 5xx, hangs,
refused connections, malformed bodies), so both collectors call through `call`, which retries
only what can heal (429, 5xx, timeouts, refused connections) and never past the deadline, and
turns everything else into an error from errors.py whose message says what to do next.

Endpoints: ML_SKILLS_VERTEX_ENDPOINT / ML_SKILLS_LOGGING_ENDPOINT override the Google endpoints
when set (an emulator or a test fake). An http:// endpoint gets anonymous credentials: a real
token is never sent over plaintext. ML_SKILLS_GCP_TIMEOUT sets the per-call timeout in seconds.
"""

from __future__ import annotations

import contextvars
import os
import re
import threading
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from ml_skills.collectors import env_seconds
from ml_skills.errors import InputError, SourceTimeout, SourceUnavailable, TargetNotFound
from ml_skills.safety.redact import redact

T = TypeVar("T")
VERTEX_ENV = "ML_SKILLS_VERTEX_ENDPOINT"
LOGGING_ENV = "ML_SKILLS_LOGGING_ENDPOINT"
TIMEOUT_ENV = "ML_SKILLS_GCP_TIMEOUT"
DEFAULT_CALL_TIMEOUT = 15.0
MAX_ATTEMPTS = 4
GRACE = 0.25  # beyond a call's timeout before its answer counts as too slow
_ENDPOINT = re.compile(r"^(https?://)?[A-Za-z0-9.\-]+(:\d{1,5})?$")


class Deadline:
    """Seconds left for one collection pass; every call and every retry wait fits inside it."""

    def __init__(self, seconds: float | None = None) -> None:
        self.call_timeout = call_timeout()
        self.end = time.monotonic() + (seconds if seconds is not None else 4 * self.call_timeout)

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def timeout(self) -> float:
        return max(0.1, min(self.call_timeout, self.left()))


def call_timeout() -> float:
    return env_seconds(TIMEOUT_ENV, DEFAULT_CALL_TIMEOUT, high=600)


def endpoint(env: str, default: str) -> str:
    """The endpoint to call: the env override when set (validated), else Google's."""
    value = os.environ.get(env, "").strip()
    if not value:
        return default
    if not _ENDPOINT.fullmatch(value):
        raise InputError(f"{env}={value!r} is not an endpoint: use host:port or http(s)://host:port")
    return value


def credentials(api_endpoint: str) -> Any:
    """Anonymous credentials for a plaintext local endpoint; None (the client's ADC) otherwise."""
    if api_endpoint.startswith("http://"):
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    return None


def _retry_after(exc: BaseException) -> float | None:
    resp = getattr(exc, "response", None)
    headers = getattr(resp, "headers", None) or {}
    raw = headers.get("Retry-After") if hasattr(headers, "get") else None
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class _TooSlow(Exception):
    """The whole answer did not arrive within the call's timeout (a server dripping bytes)."""


def _within(fn: Callable[[float], T], timeout: float) -> T:
    """Run fn(timeout), but wait for it no longer than `timeout` in total.

    The clients' timeout bounds each socket read, not the whole answer: a server that sends one
    byte every few tenths of a second never trips it, and the call would last as long as the server
    likes. So the call runs in a daemon thread that is abandoned at the bound (it ends when the
    server hangs up; being a daemon, it never holds the process open).
    """
    box: dict[str, Any] = {}
    ctx = contextvars.copy_context()

    def run() -> None:
        try:
            box["value"] = ctx.run(fn, timeout)
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread as is
            box["error"] = e

    worker = threading.Thread(target=run, name="gcp-call", daemon=True)
    worker.start()
    worker.join(timeout + GRACE)
    if worker.is_alive():
        raise _TooSlow
    if "error" in box:
        raise box["error"]
    return box["value"]


_METHOD_URL = re.compile(r"^(GET|POST|PUT|PATCH|DELETE) \S+: ")


def _short(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return redact(_METHOD_URL.sub("", " ".join(str(text).split())))[:300]


def call(fn: Callable[[float], T], what: str, deadline: Deadline, *, access: str, not_found: str) -> T:
    """Run fn(timeout) with bounded retries; raise a SourceError (or TargetNotFound) that says what to do.

    what: "Vertex AI GetPipelineJob for <name>"; access: the role to name on 401/403;
    not_found: the message for a 404.
    """
    import requests
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc
    from google.protobuf.json_format import ParseError

    last = ""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if deadline.left() <= 0:
            break
        wait = min(2.0, 0.25 * 2 ** (attempt - 1))
        try:
            return _within(fn, deadline.timeout())
        except _TooSlow:
            last = f"no complete answer within {deadline.call_timeout:g}s (timeout: the server sends too slowly)"
        except gexc.NotFound as e:
            raise TargetNotFound(not_found) from e
        except (gexc.Unauthorized, auth_exc.RefreshError) as e:
            raise SourceUnavailable(f"{what}: 401 unauthenticated ({_short(e)}); run `gcloud auth application-default login` "
                                    f"or set GOOGLE_APPLICATION_CREDENTIALS, then retry") from e
        except auth_exc.InvalidOperation as e:  # a 401 answered to anonymous credentials, which cannot refresh
            raise SourceUnavailable(f"{what}: 401 unauthenticated (the endpoint refused anonymous credentials); use an https "
                                    f"endpoint with Application Default Credentials") from e
        except auth_exc.DefaultCredentialsError as e:
            raise SourceUnavailable(f"{what}: no Google credentials found; run `gcloud auth application-default login` "
                                    f"or set GOOGLE_APPLICATION_CREDENTIALS") from e
        except (gexc.Forbidden, gexc.PermissionDenied) as e:
            raise SourceUnavailable(f"{what}: 403 permission denied ({_short(e)}); the caller needs {access}") from e
        except (gexc.TooManyRequests, gexc.ResourceExhausted) as e:
            after = _retry_after(e)
            last = f"429 rate-limited ({_short(e)})" + (f", retry after {after:g}s" if after is not None else "")
            wait = after if after is not None else max(wait, 1.0)
            if wait > deadline.left():
                raise SourceUnavailable(f"{what}: {last}, which is past the deadline; try again later") from e
        except (gexc.ServerError, gexc.DeadlineExceeded) as e:
            last = f"{getattr(e, 'code', '5xx')} {type(e).__name__} ({_short(e)})"
        except requests.exceptions.Timeout:
            last = f"no answer within {deadline.call_timeout:g}s (timeout)"
        except requests.exceptions.ConnectionError as e:
            refused = "refused" in str(e).lower()
            last = "connection refused" if refused else f"cannot connect ({_short(e)})"
        except (ParseError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            # RecursionError: the client libraries parse with json.loads, which raises it (not ValueError) on an
            # answer nested a few thousand deep; Cloud Logging's client lets it out (eighth round)
            raise SourceUnavailable(f"{what}: malformed answer ({type(e).__name__}: {_short(e)})") from e
        except gexc.GoogleAPICallError as e:
            raise SourceUnavailable(f"{what}: {getattr(e, 'code', '')} {_short(e)}") from e
        if attempt == MAX_ATTEMPTS or deadline.left() <= wait:
            break
        time.sleep(wait)
    msg = f"{what}: {last or 'no time left'} after retrying for the whole deadline; check the endpoint and try again"
    raise SourceTimeout(msg) if "timeout" in last or not last else SourceUnavailable(msg)
