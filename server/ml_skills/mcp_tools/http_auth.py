"""`--transport http`: loopback only, and a bearer token on every request.

The SDK's own auth hooks (`AuthSettings` + `TokenVerifier`) model an OAuth resource server: they
need an authorization server's issuer URL and advertise it to clients. A static token shared
with one local client is not OAuth, so a small ASGI guard wraps the SDK's streamable-HTTP app
instead: a request from anywhere but the loopback interface, or without exactly
`Authorization: Bearer TOKEN`, gets 403 / 401 before the MCP layer sees it.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from ml_skills.errors import InputError

MIN_TOKEN_CHARS = 32


def new_token() -> str:
    return secrets.token_urlsafe(32)


def load_token(path: str) -> str:
    """The token in `path`: a file owned by this server's user that only its owner can read, holding one line of at least
    32 characters. A file owned by someone else (planted at a name in /tmp before the server starts) is refused: its owner
    knows the token."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError(f"--token-file {p}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"--token-file {p} is not a regular file")
        if st.st_uid != os.geteuid():  # before the ninth round a 0600 file another user planted was accepted
            raise InputError(f"--token-file {p} belongs to uid {st.st_uid}, not to this server's user ({os.geteuid()}): "
                             "whoever owns it knows the token; use a file you own, mode 600")
        if st.st_mode & 0o077:
            raise InputError(f"--token-file {p} can be read by others (mode {stat.S_IMODE(st.st_mode):o}): chmod 600 it")
        raw = os.read(fd, 4096)
    finally:
        os.close(fd)
    token = raw.decode("utf-8", errors="replace").strip()
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() or not c.isprintable() for c in token):
        raise InputError(f"--token-file {p} must hold one token of at least {MIN_TOKEN_CHARS} printable characters, no spaces "
                         "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return token


def _loopback(scope: dict[str, Any]) -> bool:
    client = scope.get("client")
    try:
        return client is not None and ipaddress.ip_address(client[0]).is_loopback
    except ValueError:
        return False


class BearerGuard:
    """ASGI middleware: loopback peers with the right bearer token pass, everything else is refused."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # the MCP transports never use one
            return await send({"type": "websocket.close", "code": 1008})
        if scope["type"] != "http":  # lifespan
            return await self.app(scope, receive, send)
        if not _loopback(scope):
            return await _refuse(send, 403, "only loopback clients are served")
        got = dict(scope.get("headers") or []).get(b"authorization", b"")
        if not hmac.compare_digest(got, self.expected):
            return await _refuse(send, 401, "missing or wrong bearer token: send 'Authorization: Bearer TOKEN'")
        return await self.app(scope, receive, send)


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="ml-skills-mcp"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve(mcp: Any, token: str, port: int) -> None:
    """Run the SDK's streamable-HTTP app behind the guard, bound to 127.0.0.1 only."""
    import uvicorn

    app = BearerGuard(mcp.streamable_http_app(host="127.0.0.1"), token)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
