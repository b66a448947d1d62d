"""Issue 14's fifteenth round: attacks from outside beside the fourteenth round's fixes (bash's variables refused in a restart
line, `triage_runs`' globs confined, towers of combining marks, quoted-data marking, key-line-shaped paths, XML secret
elements) and at the gaps it listed as not promised.

Each test is one attack that broke a claim of docs/security.md, or a listed gap now closed, driven through the real CLI
in a child process or a real MCP client over stdio, with real files; each failed on the code before its fix (see
docs/security.md, "Fifteenth round").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import Server, text

pytestmark = pytest.mark.slow  # real child processes and servers


def _mcp_answers(srv: Server, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Each call's text and structured answer from a real MCP stdio client."""
    shown: list[str] = []

    async def go() -> None:
        async with srv.client() as c:
            for tool, args in calls:
                res = await c.call_tool(tool, args)
                shown.append(text(res) + json.dumps(res.structured_content))

    anyio.run(go)
    return shown


def test_triage_runs_gives_a_link_out_of_the_roots_one_answer_whether_its_target_exists_or_not(tmp_path: Path) -> None:
    """Promise 5: a refusal never names where a link leads, and a link out of the roots gets one answer whether its target
    exists or not. `triage_runs` asked why a run could not be read before it asked the roots: over a folder of runs, or a
    glob, a log `b.log -> /outside/nothing.log` came back as "is a dangling symlink (to /outside/nothing.log)" while
    `a.log -> /outside/exists.log` was "outside the allowed roots": where the link leads, and whether any file exists. Now
    both get the roots' one answer; the run inside is still triaged."""
    r, o = tmp_path / "root", tmp_path / "outside"
    (r / "runs" / "good").mkdir(parents=True)
    o.mkdir()
    (r / "runs" / "good" / "train.log").write_text("step 1 loss 1.0\nstep 2 loss nan\nFloatingPointError: nan\n")
    (o / "exists_payroll.log").write_text("step 1 loss 1.0\n")
    shown = []
    for name, target in (("a.log", o / "exists_payroll.log"), ("b.log", o / "missing_payroll.log")):
        (r / "runs" / name).symlink_to(target)
        shown.append(_mcp_answers(Server(tmp_path, roots=[r]), [("triage_runs", {"targets": [str(r / "runs")]}),
                                                                 ("triage_runs", {"targets": [str(r / "runs" / "*")]})]))
        (r / "runs" / name).unlink()
    for answers in shown:
        for a in answers:
            assert "payroll" not in a and "dangling" not in a, a
            assert "outside the allowed roots" in a and "step 2 loss nan" in a, a
