"""The action surface under attack (issue 14: A1, A2, A9, A10, A12, A14, F8, S14-S16).

A real server process per test, driven by the MCP SDK's client over stdio (or over HTTP on
loopback for A12); real processes to kill or start, real files to rewrite, real checkpoints
written by torch and safetensors. Each test is one reproduction from the issue: it failed on
the code before the fix.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
import safetensors.torch
import torch
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.mcp.conftest import Server, answer, server_cmd, text
from tests.security import fakes

pytestmark = pytest.mark.slow  # each test starts real servers (about 5-25 s on 2 shared cores)

def roots(tmp_path: Path) -> tuple[Path, Path]:
    """An allowed root R and a directory O outside it, as in the issue's reproductions."""
    r, o = tmp_path / "root", tmp_path / "outside"
    r.mkdir()
    o.mkdir()
    return r, o


def srv_for(tmp_path: Path, r: Path, *extra: str) -> Server:
    s = Server(tmp_path, roots=[r], extra=extra)
    s.out = tmp_path / "out"
    return s


async def call(srv: Server, name: str, args: dict, elicit=None, mode: str = "auto") -> types.CallToolResult:
    async with srv.client(elicit=elicit, mode=mode) as c:
        return await c.call_tool(name, args)


def wait_for(p: Path, seconds: float = 10) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if p.exists():
            return True
        time.sleep(0.1)
    return p.exists()


def restart(f: Path) -> dict:
    return {"action": {"kind": "restart-unchanged", "command_file": str(f)}}


# ---------------------------------------------------------------- A1: restart runs only a recorded command, after approval


def test_a1_an_arbitrary_one_line_file_never_runs_even_when_the_person_accepts(tmp_path: Path) -> None:
    r, o = roots(tmp_path)
    pwned = o / "PWNED"
    (r / "notes.txt").write_text(f"sh -c 'id > {pwned}'\n")
    (r / "command.txt").write_text(f"sh -c 'id > {pwned}'\n")  # a recorded name, but not a training launch
    (r / "launch.sh").write_text(f"#!/bin/sh\nsh -c 'id > {pwned}'\n")  # a script is a program, not a record
    (r / "evil.txt").write_text(f"{sys.executable} -c \"open({str(pwned)!r}, 'w')\"\n")
    (r / "cmd.txt").symlink_to(r / "evil.txt")  # a recorded name that is only a link to another file
    srv = srv_for(tmp_path, r)
    for f in ("notes.txt", "command.txt", "launch.sh", "cmd.txt"):
        for person in (None, answer("accept")):
            res = anyio.run(call, srv, "request_action", restart(r / f), person)
            assert res.is_error, (f, text(res))
            assert "not a recorded launch command" in text(res) or "does not record a training launch" in text(res)
    time.sleep(1)
    assert not pwned.exists()
    assert {e["outcome"] for e in srv.audit_entries()} == {"invalid"}


def test_a1_a_recorded_command_runs_only_after_the_person_sees_it_and_accepts(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    (run / "train.py").write_text("import sys; open('restarted-' + sys.argv[1], 'w').write('yes')\n")
    srv = srv_for(tmp_path, r)
    for label, person in (("no-elicitation", None), ("decline", answer("decline")), ("accept", answer("accept"))):
        (run / "command.txt").write_text(f"{sys.executable} train.py {label}\n")
        res = anyio.run(call, srv, "request_action", restart(run / "command.txt"), person)
        s = res.structured_content
        assert s["outcome"] == ("ran" if label == "accept" else label) and s["ran"] is (label == "accept"), text(res)
        assert s["risk"] == "needs-approval"
        if person is not None:
            shown = person.shown[-1]
            assert f"{sys.executable} train.py {label}" in shown and str(run) in shown
    assert wait_for(run / "restarted-accept")
    time.sleep(0.5)
    assert not (run / "restarted-no-elicitation").exists() and not (run / "restarted-decline").exists()
    assert [e["outcome"] for e in srv.audit_entries()] == ["no-elicitation", "asked", "decline", "asked", "starting", "ran"]


def test_a1_a_command_edited_after_the_approval_never_starts(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    (run / "train.py").write_text("open('started', 'w').write('yes')\n")
    (run / "command.txt").write_text(f"{sys.executable} train.py\n")

    async def person(ctx, params) -> types.ElicitResult:
        (run / "command.txt").write_text(f"{sys.executable} train.py --other\n")  # edited while the person reads
        return types.ElicitResult(action="accept", content={"approve": True})

    res = anyio.run(call, srv_for(tmp_path, r), "request_action", restart(run / "command.txt"), person, "legacy")
    assert res.structured_content["outcome"] == "failed" and "changed since the person approved" in res.structured_content["detail"]
    time.sleep(1)
    assert not (run / "started").exists()


def test_a1_no_policy_file_can_make_a_restart_run_unasked(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    audit = tmp_path / "a.jsonl"
    for body in ('[risk]\nrestart-unchanged = "safe"\n',
                 '[[overrides]]\naction = "restart-unchanged"\ntarget = "*"\nrisk = "safe"\n'):
        pol = tmp_path / "loose.toml"
        pol.write_text(body)
        p = subprocess.run(server_cmd("--allow-root", str(r), "--policy", str(pol), "--audit-log", str(audit)),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=dict(os.environ), check=False)
        assert p.returncode == 2 and "restart-unchanged cannot be 'safe'" in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- A2 and A9: repoint writes only a pointer, checked twice


def _ckpts(run: Path) -> None:
    safetensors.torch.save_file({"w": torch.ones(4)}, str(run / "step_100.safetensors"))
    torch.save({"w": torch.zeros(4)}, run / "step_200.pt")


def repoint(pointer: Path, ckpt: Path) -> dict:
    return {"action": {"kind": "repoint-checkpoint", "pointer_file": str(pointer), "checkpoint": str(ckpt)}}


def test_a2_repoint_never_overwrites_a_script_or_points_at_a_non_checkpoint(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    _ckpts(run)
    (run / "launch.sh").write_text("#!/bin/sh\necho hi\n")
    (run / "launch.sh").chmod(0o755)
    (run / "notes.txt").write_text("notes\n")
    (run / "latest").write_text("missing_step_300.safetensors\n")
    (run / "latest_exec").write_text("step_100.safetensors\n")
    (run / "latest_exec").chmod(0o755)
    (run / "resume_big.txt").write_text("a\nb\n")
    (run / "legacy.pkl").write_bytes(b"\x80\x04K\x01.")  # a pickle: its structure cannot be verified without unpickling
    before = {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in run.iterdir()}
    srv = srv_for(tmp_path, r)
    attempts = [
        (run / "launch.sh", run / "notes.txt"), (run / "launch.sh", run / "step_100.safetensors"),
        (run / "notes.txt", run / "step_100.safetensors"), (run / "latest", run / "notes.txt"),
        (run / "latest", run / "legacy.pkl"), (run / "latest_exec", run / "step_200.pt"),
        (run / "resume_big.txt", run / "step_200.pt"), (run / "latest", run / "latest"),
    ]
    for pointer, ckpt in attempts:
        res = anyio.run(call, srv, "request_action", repoint(pointer, ckpt), answer("accept"))
        assert res.is_error, (pointer.name, ckpt.name, text(res))
    after = {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in run.iterdir()}
    assert after == before
    assert {e["outcome"] for e in srv.audit_entries()} == {"invalid"}


def test_a2_a_repoint_keeps_the_mode_the_style_and_the_old_content_and_is_undoable(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    _ckpts(run)
    (run / "step_300.pt").write_bytes(b"PK\x03\x04 truncated")  # the save that failed
    (run / "latest").write_text("step_300.pt\n")
    (run / "latest").chmod(0o640)
    srv = srv_for(tmp_path, r)
    res = anyio.run(call, srv, "request_action", repoint(run / "latest", run / "step_200.pt"))  # safe: no one asked
    s = res.structured_content
    assert s["outcome"] == "ran" and s["risk"] == "safe", text(res)
    assert (run / "latest").read_text() == "step_200.pt\n"  # DeepSpeed style kept: a name beside the pointer
    assert stat.S_IMODE((run / "latest").stat().st_mode) == 0o640
    undo = s["undo"]
    assert "step_300.pt" in undo and "cp " in undo
    backup = Path(undo.split("cp ", 1)[1].split()[0])
    assert backup.read_text() == "step_300.pt\n" and not backup.is_relative_to(run)
    subprocess.run(undo.split(": ", 1)[1].split(" (it held")[0], shell=True, check=True)  # the undo, exactly as given
    assert (run / "latest").read_text() == "step_300.pt\n"
    entries = srv.audit_entries()
    assert [e["outcome"] for e in entries] == ["starting", "ran"] and str(backup) in entries[-1]["undo"]


def test_a2_moving_a_pointer_off_a_valid_checkpoint_is_a_rollback_and_asks(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    _ckpts(run)
    (run / "latest").write_text("step_200.pt\n")
    srv = srv_for(tmp_path, r)
    res = anyio.run(call, srv, "request_action", repoint(run / "latest", run / "step_100.safetensors"))
    assert res.structured_content["outcome"] == "no-elicitation" and "rollback" in res.structured_content["rule"]
    assert (run / "latest").read_text() == "step_200.pt\n"


def test_a9_a_repoint_is_checked_again_after_the_approval(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    _ckpts(run)
    pol = tmp_path / "p.toml"
    pol.write_text('[risk]\nrepoint-checkpoint = "needs-approval"\n')
    srv = srv_for(tmp_path, r, "--policy", str(pol))
    good = (run / "step_200.pt").read_bytes()

    def person(change):
        shown: list[str] = []

        async def cb(ctx, params) -> types.ElicitResult:
            shown.append(params.message)
            if len(shown) == 1:
                change()  # while the person reads the question, the files change
            return types.ElicitResult(action="accept", content={"approve": True})
        cb.shown = shown
        return cb

    def rewrite_pointer() -> None:
        (run / "latest").write_text("someone-elses-choice.pt\n")

    def truncate_checkpoint() -> None:
        (run / "step_200.pt").write_bytes(good[:100])

    # Mid-call elicitation (older clients): the approved action no longer matches the files, so nothing is written.
    for change in (rewrite_pointer, truncate_checkpoint):
        (run / "latest").write_text("gone.pt\n")
        (run / "step_200.pt").write_bytes(good)
        res = anyio.run(call, srv, "request_action", repoint(run / "latest", run / "step_200.pt"), person(change), "legacy")
        assert res.structured_content["outcome"] == "failed" and not res.structured_content["ran"], text(res)
        assert "changed since the action was prepared" in res.structured_content["detail"] or "not a valid" in res.structured_content["detail"]
        assert (run / "latest").read_text() == ("someone-elses-choice.pt\n" if change is rewrite_pointer else "gone.pt\n")
    assert [e["outcome"] for e in srv.audit_entries()] == ["asked", "starting", "failed"] * 2
    # input_required rounds (2026-07-28 clients): the retry is prepared afresh, so the person is asked again about the
    # files as they are now, or the broken checkpoint is refused before anyone is asked.
    (run / "latest").write_text("gone.pt\n")
    (run / "step_200.pt").write_bytes(good)
    p = person(rewrite_pointer)
    res = anyio.run(call, srv, "request_action", repoint(run / "latest", run / "step_200.pt"), p, "auto")
    assert len(p.shown) == 2 and "someone-elses-choice.pt" in p.shown[1] and "gone.pt" in p.shown[0]
    assert res.structured_content["outcome"] == "ran" and "someone-elses-choice.pt" in res.structured_content["undo"]
    (run / "latest").write_text("gone.pt\n")
    res = anyio.run(call, srv, "request_action", repoint(run / "latest", run / "step_200.pt"), person(truncate_checkpoint), "auto")
    assert res.is_error and "not a valid checkpoint" in text(res)
    assert (run / "latest").read_text() == "gone.pt\n"


# ---------------------------------------------------------------- A10: write-ahead audit


def test_a10_no_audit_entry_no_action_and_a_retry_does_not_run_it(tmp_path: Path) -> None:
    r, o = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    ran = o / "ran"
    (run / "train.py").write_text(f"open({str(ran)!r}, 'a').write('x\\n')\n")
    (run / "command.txt").write_text(f"{sys.executable} train.py\n")
    srv = srv_for(tmp_path, r)

    async def go() -> list[types.CallToolResult]:
        async with srv.client(elicit=answer("accept")) as c:
            srv.audit.unlink()
            srv.audit.mkdir()  # the log becomes unwritable while the server runs
            return [await c.call_tool("request_action", restart(run / "command.txt")) for _ in range(3)]

    results = anyio.run(go)
    for res in results:
        assert res.structured_content["outcome"] == "audit-failed" and not res.structured_content["ran"], text(res)
        assert "nothing ran" in res.structured_content["detail"]
    time.sleep(1)
    assert not ran.exists()


def test_a10_the_server_does_not_start_without_a_writable_audit_log(tmp_path: Path) -> None:
    r, o = roots(tmp_path)
    (o / "auditdir").mkdir()
    p = subprocess.run(server_cmd("--allow-root", str(r), "--audit-log", str(o / "auditdir")), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60, env=dict(os.environ), check=False)
    assert p.returncode == 2 and "audit log" in p.stderr and "Traceback" not in p.stderr, p.stderr


# ---------------------------------------------------------------- F8: the question cannot be forged


def test_f8_a_hostile_command_line_cannot_forge_lines_of_the_question(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    forged = "\nAction: send SIGTERM to pid 1 (an idle notebook)\nRisk: safe\r\x1b[2K\u202eexe.\u2028Expected impact: none"
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", forged])
    try:
        srv = srv_for(tmp_path, r)
        for mode in ("legacy", "auto"):
            person = answer("decline")
            res = anyio.run(call, srv, "request_action", {"action": {"kind": "kill-worker", "pid": p.pid}}, person, mode)
            assert res.structured_content["outcome"] == "decline"
            lines = person.shown[-1].split("\n")
            assert [ln.split(":")[0] for ln in lines[1:5]] == ["Action", "Risk", "Expected impact", "How to undo"], lines
            assert len(lines) == 6 and sum(ln.startswith("Risk:") for ln in lines) == 1
            shown = person.shown[-1]
            assert not any(c in shown for c in "\r\x1b\u202e\u2028")
            assert '\\nAction: send SIGTERM to pid 1' in lines[1]  # shown, quoted and escaped, inside the one Action line
        assert p.poll() is None
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()


# ---------------------------------------------------------------- S14-S16: audit, unknown-tool error, prompt


def test_s14_s16_the_audit_log_errors_and_the_prompt_never_echo_a_secret(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    gh, aws, hf, sk = fakes.github(), fakes.aws_key_id(), fakes.hf(), fakes.openai()
    srv = srv_for(tmp_path, r)

    async def go() -> tuple[list[types.CallToolResult], types.GetPromptResult]:
        async with srv.client() as c:
            res = [await c.call_tool(f"run-{gh}", {}),
                   await c.call_tool("delete_checkpoint", {aws: 1, "note": f"key {sk}"}),
                   await c.call_tool("request_action", {"action": {"kind": sk, "pid": 5}}),
                   await c.call_tool("request_action", {"action": {"kind": "kill-worker", "pid": 5, aws: gh}})]
            prompt = await c.get_prompt("check-failed-run", {"target": f"{r}/run {hf}"})
        return res, prompt

    results, prompt = anyio.run(go)
    channels = [text(x) for x in results] + [srv.audit.read_text(), prompt.model_dump_json()]
    for secret in (gh, aws, hf, sk):
        for ch in channels:
            assert secret not in ch and secret[:16] not in ch
    assert len(srv.audit_entries()) == 4 and "[REDACTED]" in srv.audit.read_text()


# ---------------------------------------------------------------- A14: get_mlflow_run never creates a database


def test_a14_a_missing_sqlite_store_is_refused_and_never_created(tmp_path: Path, monkeypatch) -> None:
    r, _ = roots(tmp_path)
    db = r / "typo.db"
    for uri in (f"sqlite:///{db}", "sqlite:///root/typo.db"):  # absolute, and relative to the server's cwd (tmp_path)
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        res = anyio.run(call, srv_for(tmp_path, r), "get_mlflow_run", {"run_id": "0123456789abcdef0123456789abcdef"})
        assert res.is_error and "does not exist" in text(res) and "Traceback" not in text(res), text(res)
        assert not db.exists()
    assert list(r.iterdir()) == []


# ---------------------------------------------------------------- A12: HTTP needs the bearer token


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_http(tmp_path: Path, srv: Server, *extra: str) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    proc = subprocess.Popen(server_cmd(*srv.args(), "--transport", "http", "--port", str(port), *extra), cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ))
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode())
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the HTTP server did not listen within 60 s")


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}


def test_a12_http_refuses_every_request_without_the_right_token(tmp_path: Path) -> None:
    r, o = roots(tmp_path)
    run = r / "run"
    run.mkdir()
    pwned = o / "PWNED_http"
    (run / "train.py").write_text(f"open({str(pwned)!r}, 'w').write('x')\n")
    (run / "command.txt").write_text(f"{sys.executable} train.py\n")
    token_file = tmp_path / "token"
    token = "t0k-" + fakes.rand(fakes.ALNUM, 40)
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    srv = srv_for(tmp_path, r)
    proc, port = _start_http(tmp_path, srv, "--token-file", str(token_file))
    url = f"http://127.0.0.1:{port}/mcp"
    h = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    try:
        call_restart = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "request_action", "arguments": restart(run / "command.txt")}}
        for auth in (None, "", "Bearer", f"Bearer {token[:-1]}", f"Bearer {token}x", f"bearer {token}", token,
                     f"Basic {token}"):
            hh = dict(h) if auth is None else {**h, "Authorization": auth}
            for body in (INIT, call_restart, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}):
                resp = httpx.post(url, headers=hh, json=body, timeout=10)
                assert resp.status_code == 401, (auth, body["method"], resp.status_code, resp.text[:200])
                assert "mcp-session-id" not in resp.headers
            assert httpx.get(url, headers=hh, timeout=10).status_code == 401
        ok = httpx.post(url, headers={**h, "Authorization": f"Bearer {token}"}, json=INIT, timeout=10)
        assert ok.status_code == 200 and ok.headers.get("mcp-session-id")

        async def go() -> tuple[set[str], types.CallToolResult]:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            async with http, Client(streamable_http_client(url, http_client=http)) as c:
                names = {t.name for t in (await c.list_tools()).tools}
                return names, await c.call_tool("request_action", restart(run / "command.txt"))

        names, res = anyio.run(go)
        assert "request_action" in names and res.structured_content["outcome"] == "no-elicitation"
        time.sleep(1)
        assert not pwned.exists()
        assert [e["outcome"] for e in srv.audit_entries()] == ["no-elicitation"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a12_a_generated_token_is_printed_once_and_a_readable_token_file_is_refused(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    srv = srv_for(tmp_path, r)
    proc, port = _start_http(tmp_path, srv)
    try:
        time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    err = proc.stderr.read().decode()
    said = [ln for ln in err.splitlines() if "Authorization: Bearer " in ln]
    assert len(said) == 1, err
    token = said[0].split("Authorization: Bearer ", 1)[1].split("'", 1)[0]
    assert len(token) >= 32
    loose = tmp_path / "loose-token"
    loose.write_text(fakes.rand(fakes.ALNUM, 40))
    loose.chmod(0o644)
    for tf in (loose, tmp_path / "no-such-token"):
        p = subprocess.run(server_cmd(*srv.args(), "--transport", "http", "--port", str(port), "--token-file", str(tf)),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=dict(os.environ), check=False)
        assert p.returncode == 2 and "--token-file" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a12_the_token_file_can_come_from_the_environment(tmp_path: Path) -> None:
    r, _ = roots(tmp_path)
    tf = tmp_path / "tok"
    token = fakes.rand(fakes.ALNUM, 40)
    tf.write_text(token)
    tf.chmod(0o600)
    srv = srv_for(tmp_path, r)
    old = os.environ.get("ML_SKILLS_MCP_TOKEN_FILE")
    os.environ["ML_SKILLS_MCP_TOKEN_FILE"] = str(tf)
    try:
        proc, port = _start_http(tmp_path, srv)
    finally:
        if old is None:
            del os.environ["ML_SKILLS_MCP_TOKEN_FILE"]
        else:
            os.environ["ML_SKILLS_MCP_TOKEN_FILE"] = old
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        h = {"Accept": "application/json, text/event-stream"}
        assert httpx.post(url, headers=h, json=INIT, timeout=10).status_code == 401
        assert httpx.post(url, headers={**h, "Authorization": f"Bearer {token}"}, json=INIT, timeout=10).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert "Authorization: Bearer" not in proc.stderr.read().decode()  # a chosen token is never printed
