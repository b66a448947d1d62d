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


def test_an_xml_secret_with_attributes_or_cdata_and_a_url_password_before_no_host_never_leave(tmp_path: Path) -> None:
    """The fourteenth round masked an XML element named for a secret (`<password>X</password>`); the same element with an
    attribute (`<password type="text">`, `<ns:password xmlns:ns="...">`) or its value in a CDATA section kept X in clear, and
    so did an element named for a secret by its `name` or `key` attribute (`<entry key="password">X</entry>`, Java's XML
    properties; `<string name="api_key">X</string>`, an Android resource). A URL password with no host after its `@` (a
    libpq or SQLAlchemy URL to a Unix socket, `postgresql://u:X@/db?host=/cloudsql/...`, Cloud SQL's documented form; a tab
    or a line break after the `@`; the line's end) was kept too: the host had to hold a character. Before: in clear in the
    CLI (text, JSON report), `read_log_tail` and `grep_log`. `<max_tokens>4096</max_tokens>` is left alone."""
    from tests.security.test_twelfth_round import _ALNUM, _fake, _printed_and_shown

    values = [_fake(_ALNUM, 20) for _ in range(9)]
    lines = [f'<password type="text">{values[0]}</password>', f'<ns:password xmlns:ns="urn:x">{values[1]}</ns:password>',
             f"<password><![CDATA[{values[2]}]]></password>", f'<entry key="db.password">{values[3]}</entry>',
             f'<string name="api_key">{values[4]}</string>',
             f"DATABASE_URL=postgresql+psycopg2://app:{values[5]}@/runs?host=/cloudsql/proj:us-central1:db",
             f"redis://:{values[6]}@\tcache:6379", f"broker https://u:{values[7]}@", f"mongodb://u:{values[8]}@ host:27017",
             "<max_tokens>4096</max_tokens>"]
    shown = _printed_and_shown(tmp_path, lines)
    for out in shown:
        assert not any(v in out for v in values), out
    assert "<max_tokens>4096</max_tokens>" in shown[-1], shown[-1]
