"""get_wandb_run and get_mlflow_run through the MCP SDK's real client, against a real server process."""

from __future__ import annotations

import socket

import anyio
import pytest

from tests.mcp.conftest import Server


def _call(server: Server, name: str, args: dict) -> tuple[bool, dict | None, str]:
    async def go() -> tuple[bool, dict | None, str]:
        async with server.client() as c:
            r = await c.call_tool(name, args)
            return bool(r.is_error), r.structured_content, " ".join(getattr(x, "text", "") for x in r.content)

    return anyio.run(go)


def test_get_wandb_run_reads_an_offline_run_inside_the_roots(offline_runs, tmp_path):
    server = Server(tmp_path, roots=[offline_runs["nan"].parents[1], tmp_path])
    err, out, _ = _call(server, "get_wandb_run", {"run": str(offline_runs["nan"])})
    assert not err
    src = out["source"]
    assert src["kind"] == "wandb" and src["state"] == "failed"
    assert {a["kind"] for a in out["trajectory"]["anomalies"]} >= {"nan-onset"}
    assert {s["name"] for s in out["trajectory"]["series"]} >= {"loss", "grad_norm", "lr", "val_loss"}
    assert "loss is nan" in out["quoted"] and out["marker"] in out["quoted"]  # the console tail comes back fenced


def test_get_wandb_run_refuses_a_directory_outside_the_roots(offline_runs, tmp_path):
    err, _, text = _call(Server(tmp_path, roots=[tmp_path]), "get_wandb_run", {"run": str(offline_runs["nan"])})
    assert err and "allowed roots" in text


def test_get_mlflow_run_says_when_the_server_is_down(tmp_path, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    err, _, text = _call(Server(tmp_path), "get_mlflow_run", {"run_id": "0123abcd"})
    assert err and "connection refused" in text


@pytest.mark.parametrize("bad", ["../../etc/passwd", "a b"])
def test_get_mlflow_run_refuses_a_bad_run_id(tmp_path, bad):
    err, _, text = _call(Server(tmp_path), "get_mlflow_run", {"run_id": bad})
    assert err and "run id" in text
