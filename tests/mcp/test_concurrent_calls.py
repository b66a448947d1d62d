"""Two tool calls at once on one server, as an agent that fans out sends them: the server runs
each in a worker thread, and the engine's cached pattern databases are shared between them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from tests.mcp.conftest import Server

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench.genlog import generate


def test_two_scans_at_once_both_answer_like_one_at_a_time(tmp_path):
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    for i, log in enumerate(logs):
        generate(log, 24 * 2**20, seed=10 + i)  # a few chunks each, so the two scans overlap
    server = Server(tmp_path)

    async def go() -> tuple[list, list]:
        async with server.client() as c:
            alone = [await c.call_tool("scan_log", {"path": str(log)}) for log in logs]
            together: list = [None, None]

            async def one(i: int) -> None:
                together[i] = await c.call_tool("scan_log", {"path": str(logs[i])})

            for _ in range(3):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(one, 0)
                    tg.start_soon(one, 1)
            return alone, together

    alone, together = anyio.run(go)
    def same(r) -> dict:  # each call has its own random marker around quoted log text: compare without it
        return json.loads(json.dumps(r.structured_content).replace(r.structured_content["marker"], "MARKER"))

    for a, t in zip(alone, together, strict=True):
        assert not a.is_error and not t.is_error, (a.content, t.content)
        for key in ("total_lines", "signatures", "trajectory"):
            assert same(t)[key] == same(a)[key]
    assert alone[0].structured_content["total_lines"] != alone[1].structured_content["total_lines"]
