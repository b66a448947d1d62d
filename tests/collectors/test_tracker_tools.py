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


OFFLINE_WITH_SECRETS = """
import wandb
run = wandb.init(project="ml-skills-tests", name="leaky", id="leakyrun", mode="offline",
                 config={"hf_token": "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345", "note": "\\x1b[31mred\\x1b[0m"})
for step in range(5):
    wandb.log({"loss": 1.0 / (step + 1)}, step=step)
run.finish()
"""


def test_get_wandb_run_counts_what_it_masked_and_stripped(tmp_path):
    """The seventy-second round: a run whose config held tokens came back with `redactions: 0` and `stripped_chars: 0`,
    the collector's reading running where the call's last pass could not count it. A real offline run, by the real
    wandb library."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
    subprocess.run([sys.executable, "-c", OFFLINE_WITH_SECRETS], env=env, check=True, capture_output=True, timeout=300)
    run = next((tmp_path / "wandb").glob("offline-run-*-leakyrun"))
    err, out, text = _call(Server(tmp_path, roots=[tmp_path]), "get_wandb_run", {"run": str(run)})
    assert not err, text
    assert "aBcDeFgHiJkLmNoPqRsTuVwXyZ012345" not in text + str(out)
    assert out["redactions"] >= 1 and out["stripped_chars"] >= 1, (out["redactions"], out["stripped_chars"])
