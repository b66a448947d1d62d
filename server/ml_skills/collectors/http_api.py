"""Read-only JSON calls to a tracker's HTTP API, with a deadline, bounded retries and one-line errors.

Every call shares one `Deadline`, so a slow or flapping server costs at most the collector's
budget, never a hang. 429 and 5xx are retried a bounded number of times with exponential
backoff, honouring Retry-After when the deadline allows it. Errors say what went wrong and
what to do next; URLs in messages are redacted (they may carry a token).
"""

from __future__ import annotations

import contextvars
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from ml_skills.errors import SourceTimeout, SourceUnavailable, TargetNotFound
from ml_skills.safety import untrusted_json
from ml_skills.safety.redact import redact, redact_cut

RETRIES = 3
BACKOFF = 0.5
MAX_BODY = 32 * 1024 * 1024
GRACE = 1.0  # seconds past the deadline a call is waited for before its connection is closed under it
T = TypeVar("T")


@dataclass
class Deadline:
    """A time budget shared by every call of one collection."""

    seconds: float
    start: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.start)

    def check(self, what: str) -> float:
        left = self.left()
        if left <= 0:
            raise SourceTimeout(f"{what}: no answer within the {self.seconds:g}s deadline")
        return left


def _retry_after(resp: httpx.Response) -> float | None:
    raw = resp.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        return None


def _status_error(name: str, what: str, resp: httpx.Response) -> Exception:
    code = resp.status_code
    body = redact_cut(resp.text.replace("\n", " ").strip(), 200)
    detail = f" ({body})" if body else ""
    if code in (401, 403):
        return SourceUnavailable(
            f"{name} refused {what}: HTTP {code}{detail}; check the credentials and that they may read this run"
        )
    if code == 404:
        return TargetNotFound(f"{name} has no {what} (HTTP 404){detail}: check the run id and the server address")
    if 300 <= code < 400:  # not followed (a redirect may leave loopback or carry the credentials elsewhere): said as what it is
        where = redact_cut(resp.headers.get("location", "").replace("\n", " ").strip(), 200)
        return SourceUnavailable(f"{name} redirected {what} (HTTP {code}{' to ' + repr(where) if where else ''}): redirects are "
                                 "not followed; give the address the server names, if it is the one meant")
    if code == 429:
        return SourceUnavailable(f"{name} kept rate-limiting {what} (HTTP 429) after {RETRIES} retries; try again later")
    return SourceUnavailable(f"{name} failed on {what}: HTTP {code}{detail}")


def _in_time(client: httpx.Client, deadline: Deadline, what: str, call: Callable[[], T]) -> T:
    """`call()` (one request on `client`) in a worker thread, waited for until the deadline. httpx's timeouts bound each
    read, and the deadline is checked between body chunks; a server dripping its status line or headers a byte at a time
    holds a read that never times out and never reaches a chunk (thirtieth round: `--mlflow` ran past 60 s on a 5 s
    deadline). Past the deadline the client is closed under the call, whose next read then fails: the worker ends at the
    server's next byte or its read timeout, and the caller has its answer now."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as e:  # noqa: BLE001  handed to the caller's thread
            box["error"] = e

    worker = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True, name="ml-skills-http")
    worker.start()
    worker.join(max(0.0, deadline.left()) + GRACE)
    if worker.is_alive():
        client.close()
        raise SourceTimeout(f"{what}: no complete answer within the {deadline.seconds:g}s deadline (the server sends its "
                            "answer too slowly)")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def request_json(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    name: str,
    what: str,
    deadline: Deadline,
    params: dict[str, Any] | None = None,
    json: Any = None,
) -> Any:
    """One JSON call; retries 429/5xx/connection resets within the deadline, raises SourceError."""
    attempt = 0
    while True:
        deadline.check(f"{name} {what}")
        try:
            resp = _in_time(client, deadline, f"{name} {what}", lambda: _bounded_request(
                client, method, url, params=params, json=json, deadline=deadline, name=name, what=what))
        except httpx.TimeoutException:
            raise SourceTimeout(
                f"{name} did not answer {what} in time ({deadline.seconds:g}s deadline); is the server up and reachable?"
            ) from None
        except httpx.ConnectError as e:
            reason = "connection refused" if "refused" in str(e).lower() else redact_cut(str(e), 160)
            raise SourceUnavailable(
                f"cannot reach {name} at {redact(str(client.base_url))}: {reason}; is the server running?"
            ) from None
        except httpx.HTTPError as e:
            if attempt >= RETRIES:
                raise SourceUnavailable(f"{name} {what}: {type(e).__name__}: {redact_cut(str(e), 160)}") from None
            attempt += 1
            time.sleep(min(BACKOFF * 2**attempt, max(0.0, deadline.left())))
            continue
        if resp.status_code == 429 or resp.status_code >= 500:
            if attempt < RETRIES:
                wait = _retry_after(resp)
                wait = BACKOFF * 2**attempt if wait is None else wait
                if wait < deadline.left():
                    attempt += 1
                    time.sleep(wait)
                    continue
            raise _status_error(name, what, resp)
        if resp.status_code >= 300:
            raise _status_error(name, what, resp)
        try:
            return untrusted_json.loads(resp.content)  # ValueError also for nesting too deep to walk
        except ValueError:
            snippet = redact_cut(resp.text.replace("\n", " "), 80)
            raise SourceUnavailable(f"{name} sent a malformed answer for {what} (not JSON: {snippet!r})") from None


def _bounded_request(
    client: httpx.Client, method: str, url: str, *, params: Any, json: Any, deadline: Deadline, name: str, what: str
) -> httpx.Response:
    """The whole answer within the deadline and the size cap.

    httpx's timeout bounds each read, not the answer: a server dripping a byte per read would
    hold the call as long as it liked, so the body is streamed and the deadline checked per chunk.
    """
    with client.stream(method, url, params=params, json=json, timeout=min(deadline.left(), 30.0)) as resp:
        body = bytearray()
        for chunk in body_chunks(resp, name, what):  # decoded: the cap also holds for a compressed answer
            body += chunk
            if len(body) > MAX_BODY:
                raise SourceUnavailable(f"{name} sent more than {MAX_BODY} bytes for {what}, over the cap")
            if deadline.left() <= 0:
                raise SourceTimeout(f"{name} {what}: the answer did not finish within the {deadline.seconds:g}s deadline "
                                    "(the server sends too slowly)")
    return _with_body(resp, bytes(body))


PIECE = 1024 * 1024  # the most one step of decompression makes: a cap is checked between steps


def body_chunks(resp: httpx.Response, name: str, what: str) -> Iterator[bytes]:
    """The answer's body decoded in steps of at most PIECE bytes. httpx decodes a whole received chunk at once, and through
    every layer of its Content-Encoding: a 3.6 KB answer sent as `gzip, gzip` decoded to 2 GiB in one step, and the 32 MiB
    cap checked after it held 4.3 GB (seventy-third round). So one layer of gzip or deflate is decoded here, in bounded
    steps; more layers, or a coding this reader does not decode, are refused."""
    coding = [c.strip().lower() for c in resp.headers.get_list("content-encoding", split_commas=True)]
    coding = [c for c in coding if c and c != "identity"]
    if not coding:
        yield from resp.iter_raw()
        return
    if len(coding) > 1 or coding[0] not in ("gzip", "x-gzip", "deflate"):
        raise SourceUnavailable(f"{name} sent {what} with Content-Encoding {redact_cut(', '.join(coding), 80)!r}: more than "
                                "one layer, or a coding ml-skills does not decode, is refused (a small answer can decode to "
                                "gigabytes); check the server or the proxy in front of it")
    wbits = zlib.MAX_WBITS if coding[0] == "deflate" else 16 + zlib.MAX_WBITS
    d, started = zlib.decompressobj(wbits), False
    try:
        for data in resp.iter_raw():
            while data:
                try:
                    out = d.decompress(data, PIECE)
                except zlib.error:
                    if started or coding[0] != "deflate":
                        raise
                    d = zlib.decompressobj(-zlib.MAX_WBITS)  # a raw deflate stream, as some servers send one
                    out = d.decompress(data, PIECE)
                started = True
                data = d.unconsumed_tail
                if out:
                    yield out
        if rest := d.flush():
            yield rest
    except zlib.error as e:
        raise SourceUnavailable(f"{name} sent {what} compressed but damaged ({e})") from None


def _with_body(resp: httpx.Response, body: bytes) -> httpx.Response:
    """The streamed answer's status and headers, with the body that was read (decoded)."""
    headers = [(k, v) for k, v in resp.headers.multi_items() if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
    return httpx.Response(resp.status_code, headers=headers, content=body, request=resp.request)


ERROR_HEAD = 4096


def _head_of(resp: httpx.Response, deadline: Deadline) -> httpx.Response:
    """An error answer with only the first ERROR_HEAD bytes of its body, read within the deadline: the error names its first
    line. Before the sixteenth round a file download's error body was read whole: a hostile MLflow server answering
    `/get-artifact` with an endless HTTP 500 body held `check-failed-run --mlflow` past its 3 s deadline (killed at 60 s,
    411 MB and growing)."""
    body = bytearray()
    for chunk in body_chunks(resp, "the server", "its error answer"):
        body += chunk
        if len(body) >= ERROR_HEAD or deadline.left() <= 0:
            break
    return _with_body(resp, bytes(body[:ERROR_HEAD]))


def fetch_tail(client: httpx.Client, url: str, *, name: str, what: str, deadline: Deadline, max_bytes: int) -> tuple[bytes, bool]:
    """The last `max_bytes` of a file served over HTTP (Range when honoured, else a bounded stream)."""
    def tail(ranged: bool) -> tuple[bytes, bool]:
        return _in_time(client, deadline, f"{name} {what}", lambda: _stream_tail(
            client, url, name=name, what=what, deadline=deadline, max_bytes=max_bytes, ranged=ranged))

    try:
        return tail(True)
    except _RangeRefused:  # some servers refuse a suffix range longer than the file: ask for all of it
        return tail(False)


class _RangeRefused(Exception):
    pass


def _stream_tail(
    client: httpx.Client, url: str, *, name: str, what: str, deadline: Deadline, max_bytes: int, ranged: bool
) -> tuple[bytes, bool]:
    left = deadline.check(f"{name} {what}")
    headers = {"Range": f"bytes=-{max_bytes}"} if ranged else {}
    try:
        with client.stream("GET", url, headers=headers, timeout=min(left, 30.0)) as resp:
            if resp.status_code == 416 and ranged:
                raise _RangeRefused
            if resp.status_code >= 300:
                raise _status_error(name, what, _head_of(resp, deadline))
            keep = bytearray()
            cut = False
            for chunk in body_chunks(resp, name, what):
                keep += chunk
                if len(keep) > 2 * max_bytes:
                    del keep[: len(keep) - max_bytes]
                    cut = True
                if deadline.left() <= 0:
                    raise SourceTimeout(f"{name} {what}: download did not finish within the {deadline.seconds:g}s deadline")
            m = re.match(r"bytes (\d+)-", resp.headers.get("content-range", ""))
            cut = cut or len(keep) > max_bytes or (resp.status_code == 206 and m is not None and int(m[1]) > 0)
            return bytes(keep[-max_bytes:]), cut
    except httpx.TimeoutException:
        raise SourceTimeout(f"{name} did not send {what} in time") from None
    except httpx.HTTPError as e:
        raise SourceUnavailable(f"{name} {what}: {type(e).__name__}: {redact_cut(str(e), 160)}") from None
