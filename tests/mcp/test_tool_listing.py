"""tools/list is served from the listing written at build time (mcp_tools/tools.json), each tool built at its first
call (issue 17): what a client sees must be exactly what building every tool from its models gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
from ml_skills.mcp_tools import listing
from ml_skills.mcp_tools.app import build_parser, build_server

from .conftest import NAN_LOG, Server, server_cmd


def _built(listed: bool, tmp_path: Path) -> list[dict]:
    mcp = build_server(build_parser().parse_args(["--allow-root", str(tmp_path), "--audit-log", os.devnull]), listed=listed)
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in anyio.run(mcp.list_tools)]


def test_the_listing_file_is_what_building_every_tool_gives() -> None:
    assert listing.LISTING.read_text("utf-8") == listing.listing_json(), "run: python -m ml_skills.gen"


EAGER = ("import sys\n"
         "from ml_skills.mcp_tools import app\n"
         "app.build_server(app.build_parser().parse_args(sys.argv[1:]), listed=False).run('stdio')\n")


def _tools_list_on_the_wire(cmd: list[str], tmp_path: Path) -> bytes:
    """The bytes of a server's tools/list answer, spoken to over stdio as a client does."""
    args = ["--allow-root", str(tmp_path), "--audit-log", str(tmp_path / "audit.jsonl")]
    p = subprocess.Popen([*cmd, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert p.stdin is not None and p.stdout is not None
    msgs = [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}]
    try:
        for m in msgs:
            p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()
        while line := p.stdout.readline():
            if json.loads(line).get("id") == 2:
                return line
        raise AssertionError("the server closed stdout before answering tools/list")
    finally:
        p.stdin.close()
        p.wait(timeout=60)


def test_the_server_lists_byte_for_byte_what_an_eager_build_lists(tmp_path: Path) -> None:
    served = _tools_list_on_the_wire(server_cmd(), tmp_path)
    eager = _tools_list_on_the_wire([sys.executable, "-c", EAGER], tmp_path)
    assert served == eager  # same tools, schemas, annotations, key order and all
    tools = json.loads(served)["result"]["tools"]
    assert len(tools) >= 16 and all(t["inputSchema"]["properties"] is not None and t["outputSchema"] for t in tools)


def test_listing_imports_no_tool_module_and_a_call_builds_only_its_own(tmp_path: Path) -> None:
    code = ("import os, sys, anyio\n"
            "from ml_skills.mcp_tools.app import build_parser, build_server\n"
            "mcp = build_server(build_parser().parse_args(['--allow-root', sys.argv[1], '--audit-log', os.devnull]))\n"
            "anyio.run(mcp.list_tools)\n"
            "tools = [m for m in sys.modules if m.startswith('ml_skills.mcp_tools.') and m.rsplit('.', 1)[1] in\n"
            "         ('logs', 'scan', 'diagnose', 'grid', 'actions', 'trackers', 'remote')]\n"
            "print(sorted(tools))\n"
            "print(sorted(t.name for t in mcp._tool_manager.list_tools() if t._real is not None))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["[]", "[]"]


def test_first_calls_run_the_real_tools_strict_arguments_included(tmp_path: Path) -> None:
    async def go() -> tuple:
        async with Server(tmp_path).client() as c:
            tail = await c.call_tool("read_log_tail", {"path": str(NAN_LOG), "lines": 5})
            bad = await c.call_tool("scan_log", {"path": str(NAN_LOG), "no_such_argument": 1})
            again = await c.call_tool("read_log_tail", {"path": str(NAN_LOG), "lines": 5})
            return tail, bad, again

    tail, bad, again = anyio.run(go)
    assert not tail.is_error and tail.structured_content["status"] == "ok"
    assert not again.is_error and again.structured_content["status"] == "ok"  # the built tool is kept and reused
    assert bad.is_error and "no_such_argument" in bad.content[0].text  # refused by the strict argument model


def test_a_missing_or_foreign_listing_means_building_every_tool(tmp_path: Path) -> None:
    assert listing.listed_tools(tmp_path / "none.json") is None
    foreign = tmp_path / "tools.json"
    foreign.write_text(json.dumps({"modules": ["other.module"], "tools": []}))
    assert listing.listed_tools(foreign) is None
    foreign.write_text("{not json")
    assert listing.listed_tools(foreign) is None
    assert len(listing.listed_tools() or []) == len(_built(False, tmp_path))
