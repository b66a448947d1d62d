"""triage_runs through the MCP SDK's real client over stdio, against a real server process."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from tests.conftest import ROOT
from tests.grid.conftest import Grid
from tests.mcp.conftest import Server

pytestmark = pytest.mark.slow


def test_triage_runs_is_read_only_confined_and_answers_with_groups(real_grid: Grid, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(ROOT / "examples" / "nan-loss" / "train.log", outside / "train.log")
    inside = tmp_path / "root" / "grid"
    shutil.copytree(real_grid.runs / "adamw-lr0.01", inside / "adamw-lr0.01")
    (inside / "escape").symlink_to(outside)  # a run that is a link out of the allowed roots
    server = Server(tmp_path, roots=[tmp_path / "root", real_grid.root])

    async def go() -> None:
        async with server.client() as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            a = tools["triage_runs"].annotations
            assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (True, False, True, False)

            res = await c.call_tool("triage_runs", {"targets": [str(real_grid.runs)], "workers": 2, "expect": str(real_grid.expect_csv),
                                                    "results": str(real_grid.results / "*.json")})
            assert not res.is_error
            r = res.structured_content
            assert r["runs_total"] == 27 and r["complete"] is True and r["status"] == "ok"
            assert r["groups"][0]["count"] == 6 and r["groups"][0]["failure_class"] == "nan-inf"
            assert "example_line" not in r["groups"][0]  # log text only inside the fence
            assert r["quoted"].startswith(f"[data {r['marker']}]") and "KeyError: 'adamw'" in r["quoted"]
            blocked = {x["run"]: x for x in r["relaunches"]}
            assert blocked["relaunch-nan"]["decision"] == "NO-GO" and blocked["relaunch-kill"]["decision"] == "GO"
            assert r["expect"]["cells_without_run"] == [f"[data {r['marker']}] never-ran [/data {r['marker']}]"]  # the grid file's text, quoted
            assert "runs" not in r  # groups, never every report

            capped = (await c.call_tool("triage_runs", {"targets": [str(real_grid.runs)], "max_runs": 3, "workers": 1})).structured_content
            assert capped["runs_total"] == 3 and capped["complete"] is False and capped["status"] == "partial"

            mixed = (await c.call_tool("triage_runs", {"targets": [str(inside)], "workers": 1})).structured_content
            rows = {g["outcome"]: g for g in mixed["groups"]}
            assert rows["unreadable"]["runs"] == ["escape"] and "outside the allowed roots" in mixed["quoted"]
            assert rows["failed"]["runs"] == ["adamw-lr0.01"]

            refused = await c.call_tool("triage_runs", {"targets": [str(outside)]})
            assert refused.is_error and "outside the allowed roots" in refused.content[0].text
            refused = await c.call_tool("triage_runs", {"targets": ["/*/train.log"]})
            assert refused.is_error
        assert not server.out.exists() or not any(server.out.iterdir())  # wrote nothing

    anyio.run(go)
