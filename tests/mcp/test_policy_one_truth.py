"""One policy, one truth: the risk a report gives each fix is the risk the policy enforces.

Before, the planner read the built-in table (policy/risk.py) whatever policy the face had loaded: under a
policy making `inspect` needs-approval, `diagnose` still called "find the bad batch" safe while
`classify_action` (and so `request_action`) said needs-approval.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from tests.conftest import run_cli
from tests.mcp.conftest import NAN_LOG, Server

TIGHT = '''version = 1
[risk]
inspect = "needs-approval"
'''


def _policy(tmp_path: Path) -> Path:
    p = tmp_path / "policy.toml"
    p.write_text(TIGHT)
    return p


def test_cli_rates_fixes_by_the_policy_file(tmp_path: Path) -> None:
    """The nan-loss example's "find the bad batch" fix is an inspect, safe by default; the file makes it needs-approval."""
    default = run_cli("check-failed-run", str(NAN_LOG), "--out-dir", str(tmp_path / "a"), "--fields", "fixes.kind,fixes.risk")
    assert default.returncode == 0, default.stderr
    d = json.loads(default.stdout)
    assert ("inspect", "safe") in zip(d["fixes.kind"], d["fixes.risk"])

    tight = run_cli("check-failed-run", str(NAN_LOG), "--out-dir", str(tmp_path / "b"), "--policy", str(_policy(tmp_path)))
    assert tight.returncode == 0, tight.stderr
    report = json.loads((tmp_path / "b" / "check-failed-run.json").read_text())
    inspects = [f for f in report["fixes"] if f["kind"] == "inspect"]
    assert inspects and all(f["risk"] == "needs-approval" and "policy.toml [risk] inspect" in f["risk_rule"] for f in inspects)
    for f in inspects:  # the printed report says it too
        assert f"{f['action']} | risk=needs-approval" in tight.stdout

    bad = run_cli("check-failed-run", str(NAN_LOG), "--out-dir", str(tmp_path / "c"), "--policy", str(tmp_path / "none.toml"))
    assert bad.returncode == 2 and "no policy file" in bad.stderr and "Traceback" not in bad.stderr


def test_mcp_diagnose_and_classify_action_agree_under_the_servers_policy(tmp_path: Path) -> None:
    srv = Server(tmp_path, extra=("--policy", str(_policy(tmp_path))))

    async def go():
        async with srv.client() as c:
            await c.call_tool("diagnose", {"target": str(NAN_LOG)})
            fields = await c.call_tool("read_report", {"fields": ["fixes.kind", "fixes.risk", "fixes.risk_rule"]})
            f = fields.structured_content["fields"]
            m = fields.structured_content["marker"]  # read_report marks the text it reads from the file as data (fifth round)
            f["fixes.risk_rule"] = [r.removeprefix(f"[data {m}] ").removesuffix(f" [/data {m}]") for r in f["fixes.risk_rule"]]
            verdicts = {k: (await c.call_tool("classify_action", {"action": k})).structured_content for k in set(f["fixes.kind"])}
            return f, verdicts

    f, verdicts = anyio.run(go)
    assert "inspect" in f["fixes.kind"]
    for kind, risk, rule in zip(f["fixes.kind"], f["fixes.risk"], f["fixes.risk_rule"]):
        assert (risk, rule) == (verdicts[kind]["risk"], verdicts[kind]["rule"]), kind
    assert verdicts["inspect"]["risk"] == "needs-approval"
