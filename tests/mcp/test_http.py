"""The same server over streamable HTTP on 127.0.0.1, through the SDK's client."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.mcp.conftest import NAN_LOG, Server, answer, server_cmd


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server(tmp_path: Path):
    srv = Server(tmp_path)
    port = _free_port()
    srv.token = secrets.token_urlsafe(32)  # type: ignore[attr-defined]
    token_file = tmp_path / "token"
    token_file.write_text(srv.token)  # type: ignore[attr-defined]
    token_file.chmod(0o600)
    proc = subprocess.Popen(server_cmd(*srv.args(), "--transport", "http", "--port", str(port), "--token-file", str(token_file)), cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode())
            time.sleep(0.2)
    else:
        proc.kill()
        raise AssertionError("the HTTP server did not listen within 60 s")
    yield srv, f"http://127.0.0.1:{port}/mcp", port
    proc.terminate()
    proc.wait(timeout=20)


def test_http_lists_tools_reads_logs_and_gates_actions(http_server, sleeper) -> None:
    srv, url, _ = http_server
    victim, spared = sleeper(), sleeper()

    def transport():
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {srv.token}"})
        return http, streamable_http_client(url, http_client=http)

    async def go() -> tuple:
        http, t = transport()
        async with http, Client(t, elicitation_callback=answer("accept")) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            tail = await c.call_tool("read_log_tail", {"path": str(NAN_LOG), "lines": 3})
            killed = await c.call_tool("request_action", {"action": {"kind": "kill-worker", "pid": victim.pid}})
        http, t = transport()
        async with http, Client(t) as c:  # no elicitation support: nothing runs
            refused = await c.call_tool("request_action", {"action": {"kind": "kill-worker", "pid": spared.pid}})
        return names, tail, killed, refused

    names, tail, killed, refused = anyio.run(go)
    assert {"read_log_tail", "scan_log", "diagnose", "request_action"} <= names
    assert "FloatingPointError" in tail.structured_content["text"]
    assert killed.structured_content["outcome"] == "ran"
    victim.wait(timeout=10)
    assert refused.structured_content["outcome"] == "no-elicitation" and spared.poll() is None
    assert [e["outcome"] for e in srv.audit_entries()] == ["asked", "starting", "ran", "no-elicitation"]


def test_http_listens_on_loopback_only_and_refuses_foreign_hosts(http_server) -> None:
    _, url, port = http_server
    # DNS rebinding: a page on another origin reaching 127.0.0.1 carries its own Host header.
    srv = http_server[0]
    r = httpx.post(url, headers={"Host": f"evil.example:{port}", "Accept": "application/json, text/event-stream",
                                 "Authorization": f"Bearer {srv.token}"},
                   json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
    assert r.status_code == 421
    addrs = {ip for ip in _local_addresses() if not ip.startswith("127.")}
    for ip in addrs:
        with pytest.raises(OSError):
            socket.create_connection((ip, port), timeout=1).close()


def _local_addresses() -> set[str]:
    out = set()
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            out.add(info[4][0])
    except OSError:
        pass
    return out
