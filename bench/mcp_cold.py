"""Cold start of an MCP server over stdio: spawn it, initialize, and time the first tools/list answer.

    python bench/mcp_cold.py ml-skills [PYTHONPATH]   # our server (ml_skills.mcp_tools.app)
    python bench/mcp_cold.py bare N                   # a bare SDK server registering N trivial tools

Prints JSON: seconds to the tools/list answer, the number of tools, and which heavy SDKs the
server process imported (from its -X importtime log).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

BARE = """
from mcp.server.mcpserver import MCPServer
srv = MCPServer("bare")
for i in range({n}):
    def tool(path: str, last: int = 500) -> str:
        return path
    tool.__name__ = f"tool_{{i}}"
    srv.add_tool(tool, name=f"tool_{{i}}", description="a tool")
srv.run("stdio")
"""


def _send(p, msg: dict) -> None:
    p.stdin.write((json.dumps(msg) + "\n").encode())
    p.stdin.flush()


def _answer(p, want_id: int) -> dict:
    while True:
        line = p.stdout.readline()
        if not line:
            raise SystemExit("server closed stdout: " + p.stderr.read().decode(errors="replace")[-800:])
        msg = json.loads(line)
        if msg.get("id") == want_id:
            return msg


def main(argv: list[str]) -> None:
    env = dict(os.environ)
    if argv[0] == "bare":
        cmd = [sys.executable, "-X", "importtime", "-c", BARE.format(n=int(argv[1]))]
    else:
        if len(argv) > 1:
            env["PYTHONPATH"] = argv[1]
        cmd = [sys.executable, "-X", "importtime", "-m", "ml_skills.mcp_tools.app", "--allow-root", os.getcwd()]
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _send(p, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}})
    _answer(p, 1)
    _send(p, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(p, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    tools = _answer(p, 2)["result"]["tools"]
    seconds = time.perf_counter() - t
    try:
        err = p.communicate(timeout=20)[1].decode(errors="replace")
    except subprocess.TimeoutExpired:
        p.kill()
        err = p.communicate()[1].decode(errors="replace")
    mods = {ln.rsplit("|", 1)[-1].strip() for ln in err.splitlines() if ln.startswith("import time:")}
    heavy = sorted(m for m in mods if m.split(".")[0] in ("wandb", "mlflow") or m.startswith("google.cloud."))
    print(json.dumps({"seconds": seconds, "tools": len(tools), "heavy_sdks": heavy}))


if __name__ == "__main__":
    main(sys.argv[1:])
