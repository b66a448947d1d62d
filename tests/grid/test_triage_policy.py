"""triage-runs rates each run's fixes by the policy it is given, in every worker, as check-failed-run does.

Before, only check-failed-run and the MCP `diagnose` took the policy (issue 16, item 3): a grid's groups rated
fixes by the built-in table, so under a team policy making hyperparameter changes dangerous, triage-runs still
showed the nan-loss runs' "lower the learning rate" fix as needs-approval while check-failed-run --policy said
dangerous. The pool's workers are other processes: the policy travels with each task, never re-read from the file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio

from tests.grid.test_real_grid import triage_cli
from tests.mcp.conftest import NAN_LOG, Server

TIGHT = 'version = 1\n[risk]\nchange-hyperparameter = "dangerous"\n'


def _grid(tmp_path: Path) -> Path:
    grid = tmp_path / "grid"
    for name in ("lr-0.15", "lr-0.15-seed2"):
        (grid / name).mkdir(parents=True)
        shutil.copy(NAN_LOG, grid / name / "train.log")
    (tmp_path / "policy.toml").write_text(TIGHT)
    return grid


def _risks(report: dict) -> set[tuple[str, str]]:
    return {(f["fix_id"], f["risk"]) for g in report["groups"] for f in g["fixes"]}


def test_triage_runs_rates_fixes_by_the_policy_file_in_every_worker(tmp_path: Path) -> None:
    grid = _grid(tmp_path)
    default = triage_cli(str(grid), "--workers", "2", "--out-dir", str(tmp_path / "a"), "--format", "json", cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    assert ("lower-lr-add-warmup", "needs-approval") in _risks(json.loads(default.stdout))

    tight = triage_cli(str(grid), "--workers", "2", "--out-dir", str(tmp_path / "b"), "--format", "json",
                       "--policy", str(tmp_path / "policy.toml"), cwd=tmp_path)
    assert tight.returncode == 0, tight.stderr
    risks = _risks(json.loads(tight.stdout))
    assert ("lower-lr-add-warmup", "dangerous") in risks and ("lower-lr-add-warmup", "needs-approval") not in risks

    bad = triage_cli(str(grid), "--out-dir", str(tmp_path / "c"), "--policy", str(tmp_path / "none.toml"), cwd=tmp_path)
    assert bad.returncode == 2 and "no policy file" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "c" / "triage-runs.json").exists()


def test_the_mcp_triage_runs_tool_rates_fixes_by_the_servers_policy(tmp_path: Path) -> None:
    grid = _grid(tmp_path)
    srv = Server(tmp_path, extra=("--policy", str(tmp_path / "policy.toml")))

    async def go() -> dict:
        async with srv.client() as c:
            res = await c.call_tool("triage_runs", {"targets": [str(grid)], "workers": 2})
            assert not res.is_error, res.content
            return res.structured_content

    out = anyio.run(go)
    assert ("lower-lr-add-warmup", "dangerous") in _risks(out), out.get("groups")
