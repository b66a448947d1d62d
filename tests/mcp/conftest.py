"""A real ml-skills-mcp server process per test, driven by the MCP SDK's own client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters, types

ROOT = Path(__file__).resolve().parents[2]
REAL_LOGS = sorted((ROOT / "tests" / "real-logs").glob("*/train.log"))
NAN_LOG = ROOT / "examples" / "nan-loss" / "train.log"


def server_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "ml_skills.mcp_tools.app", *args]


class Server:
    """Arguments and files of one server: its roots, out dir and audit log in tmp_path."""

    def __init__(self, tmp_path: Path, roots: list[Path] | None = None, extra: tuple[str, ...] = ()) -> None:
        self.tmp = tmp_path
        self.roots = roots or [tmp_path, ROOT]
        self.out = tmp_path / "out"
        self.audit = tmp_path / "audit.jsonl"
        self.extra = extra

    def args(self) -> list[str]:
        a: list[str] = []
        for r in self.roots:
            a += ["--allow-root", str(r)]
        return a + ["--out-dir", str(self.out), "--audit-log", str(self.audit), *self.extra]

    def audit_entries(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [json.loads(x) for x in self.audit.read_text().splitlines() if x.strip()]

    @asynccontextmanager
    async def client(self, elicit: Callable[..., Any] | None = None, mode: str = "auto", **kw: Any) -> AsyncIterator[Client]:
        cmd = server_cmd(*self.args())
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ), cwd=str(self.tmp))
        async with Client(params, elicitation_callback=elicit, mode=mode, read_timeout_seconds=120, **kw) as c:
            yield c


@pytest.fixture
def server(tmp_path: Path) -> Server:
    return Server(tmp_path)


def answer(action: str, approve: bool = True) -> Callable[..., Any]:
    """An elicitation callback standing in for the person: accept, decline or cancel; records what it was shown."""
    shown: list[str] = []

    async def cb(ctx: Any, params: Any) -> types.ElicitResult:
        shown.append(params.message)
        if action == "accept":
            return types.ElicitResult(action="accept", content={"approve": approve})
        return types.ElicitResult(action=action)

    cb.shown = shown  # type: ignore[attr-defined]
    return cb


@pytest.fixture
def sleeper():
    """A real child process to be killed (or not)."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def call_once(srv: Server, tool: str, args: dict[str, Any]) -> tuple[bool, str, dict[str, Any]]:
    """(is an error, the text, the structured content) of one call from a client that cannot ask the person."""
    import anyio

    got: list[tuple[bool, str, dict[str, Any]]] = []

    async def go() -> None:
        async with srv.client() as c:
            res = await c.call_tool(tool, args)
            got.append((bool(res.is_error), text(res), res.structured_content or {}))

    anyio.run(go)
    return got[0]


def answers(srv: Server, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Each call's text and structured answer, from one real MCP stdio client session."""
    import anyio

    shown: list[str] = []

    async def go() -> None:
        async with srv.client() as c:
            for tool, args in calls:
                res = await c.call_tool(tool, args)
                shown.append(text(res) + json.dumps(res.structured_content))

    anyio.run(go)
    return shown


def timed_calls(srv: Server, calls: list[tuple[str, dict]], limit: float) -> list[tuple[bool, str, float]]:
    """Each call's (is_error, text and structured answer, seconds), each held to `limit` seconds by the client."""
    got: list[tuple[bool, str, float]] = []

    async def go() -> None:
        async with srv.client() as client:
            for name, args in calls:
                t = time.monotonic()
                with anyio.fail_after(limit):
                    res = await client.call_tool(name, args)
                got.append((bool(res.is_error), text(res) + json.dumps(res.structured_content or {}), time.monotonic() - t))

    anyio.run(go)
    return got
