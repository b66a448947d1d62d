"""A client nobody here wrote: the MCP Inspector CLI from npm drives the real server over stdio."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.mcp.conftest import NAN_LOG, ROOT, server_cmd

pytestmark = pytest.mark.skipif(shutil.which("npx") is None, reason="npx is not installed: the MCP Inspector CLI needs Node.js (tests/run.sh installs it)")

INSPECTOR = os.environ.get("ML_SKILLS_INSPECTOR", "@modelcontextprotocol/inspector@0.15.0")  # pinned: tests/run.sh pre-fetches it


def inspector(tmp_path: Path, *args: str) -> dict:
    cmd = ["npx", "-y", INSPECTOR, "--cli", *server_cmd("--allow-root", str(ROOT), "--allow-root", str(tmp_path),
                                                         "--audit-log", str(tmp_path / "audit.jsonl"), "--out-dir", str(tmp_path)), *args]
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=240, cwd=tmp_path, env=dict(os.environ), stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_inspector_lists_and_calls_tools(tmp_path: Path, sleeper) -> None:
    tools = {t["name"]: t for t in inspector(tmp_path, "--method", "tools/list")["tools"]}
    assert tools["scan_log"]["annotations"]["readOnlyHint"] is True and "outputSchema" in tools["scan_log"]
    assert tools["request_action"]["annotations"]["destructiveHint"] is True

    scan = inspector(tmp_path, "--method", "tools/call", "--tool-name", "scan_log", "--tool-arg", f"path={NAN_LOG}")
    assert not scan.get("isError") and scan["structuredContent"]["trajectory"]["first_nan_step"] == 11

    p = sleeper()  # the Inspector CLI cannot elicit: the action must not run
    act = inspector(tmp_path, "--method", "tools/call", "--tool-name", "request_action",
                    "--tool-arg", f'action={{"kind":"kill-worker","pid":{p.pid}}}')
    assert act["structuredContent"]["outcome"] == "no-elicitation" and p.poll() is None
