"""Issue 14's twenty-sixth round: attacks from outside on the code new since the twenty-fifth (the sealed request state
passed by the last redaction pass, the recovery plan's ordering, DeepSpeed's skipped steps, the Ultralytics results row,
the closing timer, batch 36's signatures and counters).

Each test is one family of attacks that broke a claim of docs/security.md, driven through a real MCP stdio client or the
CLI in a child process with real files; each failed on the code before its fix (see docs/security.md, "Twenty-sixth round").
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, text

pytestmark = pytest.mark.slow  # real child processes

_HF = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
_GH = "ghp_" + "A1b2C3d4" * 4 + "e5F6"


def test_a_key_named_like_the_sealed_request_state_never_carries_a_secret_out(tmp_path: Path) -> None:
    """Promise 3: every secret shape is redacted in every channel. The last redaction pass leaves the MCP SDK's sealed
    `requestState` as it is (an approval's round trip; 82f91c3), but it left every dict key named `request_state` or
    `requestState` anywhere in a result: a check-failed-run.json planted in a run folder with such keys, read by
    `read_report`, handed a Hugging Face token and a GitHub token in clear in the structured content (the form Claude Code
    hands its model), at the top and nested. Only an `input_required` result's own field is passed now."""
    run = tmp_path / "run"
    run.mkdir()
    report = {"schema_version": 1, "primary_cause": {"requestState": _HF, "x": "y"}, "request_state": _HF,
              "requestState": f"token {_GH}", "fixes": [{"request_state": {"requestState": _GH}}],
              "wire": {"resultType": "input_required", "requestState": _HF}}
    (run / "check-failed-run.json").write_text(json.dumps(report))
    srv = Server(tmp_path, roots=[tmp_path])
    fields = ["request_state", "requestState", "primary_cause", "fixes", "wire", "primary_cause.requestState"]

    async def go() -> list[str]:
        async with srv.client() as c:
            r = await c.call_tool("read_report", {"path": str(run / "check-failed-run.json"), "fields": fields})
            return [text(r), json.dumps(r.structured_content)]

    said = anyio.run(go)
    assert '"fields"' in said[1], said
    for out in said:
        assert _HF not in out and _GH not in out, out
