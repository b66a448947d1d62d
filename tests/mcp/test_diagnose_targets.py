"""diagnose on every target form the CLI takes, through the SDK's real client over stdio:
a remote log over a real sshd, a real live process, and the refusals that keep it to one target."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from tests.collectors import sshd as sshd_server
from tests.mcp.conftest import NAN_LOG, Server, text

USER = pwd.getpwuid(os.getuid()).pw_name


def _diagnose(server: Server, args: dict) -> tuple[bool, dict | None, str]:
    async def go() -> tuple[bool, dict | None, str]:
        async with server.client() as c:
            r = await c.call_tool("diagnose", args)
            return bool(r.is_error), r.structured_content, text(r)

    return anyio.run(go)


def test_remote_log_is_diagnosed_over_ssh(tmp_path, monkeypatch):
    (tmp_path / "sshd").mkdir()
    s = sshd_server.start(tmp_path / "sshd")
    try:
        monkeypatch.setenv("ML_SKILLS_SSH_CONFIG", s.client_config("ok"))
        run = tmp_path / "remote-run"
        run.mkdir()
        shutil.copy(NAN_LOG, run / "train.log")
        server = Server(tmp_path)
        err, out, raw = _diagnose(server, {"target": f"{USER}@127.0.0.1:{run / 'train.log'}"})
    finally:
        s.stop()
    assert not err, raw
    d = out
    assert d["target_kind"] == "ssh" and d["primary_cause"] == "nan-inf" and d["run_status"] == "crashed"
    assert Path(out["report_path"]).is_file() and Path(out["report_path"]).parent == server.out


def test_live_process_is_diagnosed_from_the_log_it_writes(tmp_path):
    log = tmp_path / "train.log"
    # a real process that writes the real NaN run's log line by line, keeps it open, then idles
    script = ("import sys, time\n"
              "f = open(sys.argv[2], 'w')\n"
              "for line in open(sys.argv[1]):\n"
              "    f.write(line); f.flush()\n"
              "time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(NAN_LOG), str(log)])
    try:
        deadline = time.monotonic() + 30
        while not (log.exists() and log.stat().st_size == NAN_LOG.stat().st_size):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        err, out, raw = _diagnose(Server(tmp_path), {"pid": proc.pid})
        assert proc.poll() is None, "diagnose must not touch the process"
    finally:
        proc.kill()
        proc.wait()
    assert not err, raw
    d = out
    assert d["target_kind"] == "pid" and d["primary_cause"] == "nan-inf"
    assert str(log) in d.get("logs", {}).values() or any(str(log) in e for e in d["evidence"]), (d["evidence"], d.get("logs"))


@pytest.mark.parametrize("args, says", [
    ({}, "give exactly one of target"),
    ({"target": str(NAN_LOG), "pid": 1}, "(got target, pid)"),
    ({"mlflow": "abc", "wandb": "team/proj/run1"}, "(got wandb, mlflow)"),
    ({"target": str(NAN_LOG), "project": "p"}, "project and region go with vertex_pipeline only"),
    ({"wandb": "/etc"}, "outside the allowed roots"),
])
def test_one_target_and_only_inside_the_roots(tmp_path, args, says):
    err, _, raw = _diagnose(Server(tmp_path), args)
    assert err and says in raw, raw
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
