"""read_remote_log through the MCP SDK's real client over stdio, against a real sshd on 127.0.0.1."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import jsonschema
import pytest

from tests.collectors import sshd as sshd_server
from tests.mcp.conftest import NAN_LOG, Server, text

USER = pwd.getpwuid(os.getuid()).pw_name  # sshd runs as us, so it logs us in
HF_TOKEN = "hf_" + "Ab3" * 12  # a token-shaped string (not a real token): it must not come back


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    s = sshd_server.start(tmp_path_factory.mktemp("sshd"))
    yield s
    s.stop()


def _call(server: Server, args: dict) -> tuple[bool, dict | None, str, dict]:
    async def go() -> tuple[bool, dict | None, str, dict]:
        async with server.client() as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            r = await c.call_tool("read_remote_log", args)
            return bool(r.is_error), r.structured_content, text(r), tools["read_remote_log"].model_dump(by_alias=True)

    return anyio.run(go)


def _run_dir(tmp_path: Path) -> Path:
    """The real NaN log, a real crash's stderr, and a config holding a secret, as a scheduler leaves them."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(NAN_LOG, run / "train.log")
    with open(run / "stderr.txt", "wb") as err:
        subprocess.run([sys.executable, "-c", "import json; json.load(open('dataset_config.json'))"], cwd=run, stderr=err, check=False)
    (run / "train_args.json").write_text(f'{{"lr": 0.15, "hub_token": "{HF_TOKEN}"}}\n')
    (run / "model.safetensors").write_bytes(b"\0" * 100)
    return run


def test_remote_log_tail_and_companions_come_back_fenced_and_redacted(sshd, tmp_path, monkeypatch):
    monkeypatch.setenv("ML_SKILLS_SSH_CONFIG", sshd.client_config("ok"))
    run = _run_dir(tmp_path)
    err, out, raw, listed = _call(Server(tmp_path), {"target": f"{USER}@127.0.0.1:{run / 'train.log'}", "lines": 10})
    assert not err, raw
    jsonschema.validate(out, listed["outputSchema"])
    a = listed["annotations"]
    assert (a["readOnlyHint"], a["destructiveHint"], a["openWorldHint"]) == (True, False, True)
    assert out["status"] == "ok" and out["log_state"] == "ok" and out["host"] == "127.0.0.1"
    assert out["size_bytes"] == NAN_LOG.stat().st_size and out["line_count"] == 10
    marker = out["marker"]
    last = NAN_LOG.read_text().splitlines()[-10:]
    assert out["text"].startswith(f"[data {marker}]") and out["text"].endswith(f"[/data {marker}]")
    assert out["text"].splitlines()[1:-1] == last
    files = {c["name"]: c for c in out["companions"]}
    assert set(files) == {"stderr.txt", "train_args.json"}  # the checkpoint is not a companion
    assert files["stderr.txt"]["read"] == "tail" and "FileNotFoundError" in files["stderr.txt"]["text"]
    assert files["train_args.json"]["read"] == "head" and f"[data {marker}]" in files["train_args.json"]["text"]
    assert HF_TOKEN not in raw and HF_TOKEN not in str(out) and "[REDACTED]" in files["train_args.json"]["text"]
    assert out["redactions"] >= 1


def test_missing_log_keeps_the_companions_as_partial_evidence(sshd, tmp_path, monkeypatch):
    monkeypatch.setenv("ML_SKILLS_SSH_CONFIG", sshd.client_config("ok2"))
    run = _run_dir(tmp_path)
    (run / "train.log").unlink()
    err, out, raw, _ = _call(Server(tmp_path), {"target": f"{USER}@127.0.0.1:{run / 'train.log'}"})
    assert not err, raw
    assert out["status"] == "partial" and out["log_state"] == "missing" and out["line_count"] == 0
    assert any("no such file" in n for n in out["notes"])
    assert "FileNotFoundError" in {c["name"]: c for c in out["companions"]}["stderr.txt"]["text"]


@pytest.mark.parametrize("case, message", [
    ("unknown-host-key", "not in known_hosts and unknown keys are never accepted"),
    ("missing-file", "no such file on 127.0.0.1"),
    ("option-host", "starting with '-'"),
])
def test_failures_are_one_clear_tool_error(sshd, tmp_path, monkeypatch, case, message):
    target = f"{USER}@127.0.0.1:{NAN_LOG}"
    if case == "unknown-host-key":
        monkeypatch.setenv("ML_SKILLS_SSH_CONFIG", sshd.client_config("unknown", known_hosts="empty_known_hosts"))
    else:
        monkeypatch.setenv("ML_SKILLS_SSH_CONFIG", sshd.client_config("ok3"))
    if case == "missing-file":
        target = f"{USER}@127.0.0.1:{tmp_path}/nope.log"
    if case == "option-host":
        target = f"{USER}@-oProxyCommand=touch {tmp_path}/INJECTED:/tmp/a.log"
    err, _, raw, _ = _call(Server(tmp_path), {"target": target})
    assert err and message in raw and "Traceback" not in raw
    assert not (tmp_path / "INJECTED").exists()
    assert (sshd.root / "empty_known_hosts").read_text() == ""  # never learned a key on the model's behalf
