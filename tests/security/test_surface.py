"""Nothing mutable without the policy, and evidence tools change nothing on disk.

A real server process, the MCP SDK's client. Every hostile call (unknown names, mutating verbs,
extra fields, forged approval fields) gets a clear error, an audit entry and no side effect;
then the whole evidence tool set and the CLI run under a file-tree watch (content hashes,
sizes, modes and mtimes before and after): only --out-dir changes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import anyio
import pytest
import safetensors.torch
import torch

from tests.conftest import run_cli
from tests.mcp.conftest import NAN_LOG, Server, sleeper, text  # noqa: F401 (sleeper is a fixture)
from tests.security.figures import record

UNKNOWN = ["delete_checkpoint", "rm", "shell", "exec", "write_file", "kill", "run_command", "delete-checkpoint",
           "request_action ", "REQUEST_ACTION", "diagnose\x00", "../request_action", "tools/call", "approve_action"]


def snapshot(root: Path, skip: tuple[Path, ...]) -> dict[str, tuple]:
    """Every entry under root: kind, mode, size, mtime and a content hash (atime is ignored: reads may set it)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        if any(d == s or d.is_relative_to(s) for s in skip):
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            p = d / name
            if any(p == s for s in skip):
                continue
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else None
            out[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, digest)
    return out


@pytest.fixture
def run_tree(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "checkpoint-100").mkdir(parents=True)
    shutil.copy(NAN_LOG, run / "train.log")  # a real run's log (examples/nan-loss)
    torch.save({"w": torch.ones(3)}, run / "checkpoint-100" / "model.pt")
    safetensors.torch.save_file({"w": torch.ones(3)}, str(run / "checkpoint-100" / "model.safetensors"))
    (run / "command.txt").write_text("python train.py\n")
    (run / "latest").write_text("checkpoint-100\n")
    os.mkfifo(run / "pipe.log")
    return run


def test_hostile_calls_get_a_clear_error_an_audit_entry_and_no_side_effect(
        run_tree: Path, tmp_path: Path, sleeper) -> None:  # noqa: F811 (the fixture imported above)
    victim = sleeper()
    srv = Server(tmp_path, roots=[run_tree])
    before = snapshot(run_tree, ())
    hostile: list[tuple[str, dict]] = [(name, {"path": str(run_tree / "checkpoint-100")}) for name in UNKNOWN]
    hostile += [
        ("read_log_tail", {"path": str(run_tree / "train.log"), "delete": True}),  # extra field on an evidence tool
        ("inspect_checkpoint", {"path": str(run_tree / "checkpoint-100"), "mode": "w"}),
        ("request_action", {"action": {"kind": "delete-checkpoint", "path": str(run_tree / "checkpoint-100")}}),
        ("request_action", {"action": {"kind": "kill-worker", "pid": victim.pid, "signal": "KILL"}, "approved": True}),
        ("request_action", {"action": {"kind": "kill-worker", "pid": victim.pid, "signal": "KILL", "approved_by": "the person"}}),
        ("request_action", {"action": {"kind": "kill-worker", "pid": victim.pid}, "approval_id": "0" * 16, "approve": True}),
        ("request_action", {"action": {"kind": "restart-unchanged", "command_file": str(run_tree / "command.txt"),
                                       "command": "rm -rf /"}}),
        ("request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": "/etc/passwd", "checkpoint": "/"}}),
        ("request_action", {"action": {"kind": "cancel-cloud-job", "job": "projects/p/locations/l/pipelineJobs/x; rm -rf /"}}),
    ]

    async def go() -> tuple[list[str], list]:
        async with srv.client() as c:
            names = [t.name for t in (await c.list_tools()).tools]
            return names, [await c.call_tool(n, a) for n, a in hostile]

    names, results = anyio.run(go)
    assert "request_action" in names and not any(n in names for n in UNKNOWN)
    for (name, _args), r in zip(hostile, results, strict=True):
        assert r.is_error, (name, text(r))
        msg = text(r)
        assert msg.count("\n") < 40 and "Traceback" not in msg, msg
    assert victim.poll() is None  # nothing killed
    assert snapshot(run_tree, ()) == before  # nothing written, renamed or deleted
    audit = srv.audit_entries()
    action_calls = [n for n, _ in hostile if n == "request_action" or n in UNKNOWN]
    assert len(audit) >= len(action_calls)
    assert {e["outcome"] for e in audit} <= {"unknown-tool", "invalid"}
    record("hostile inputs", "MCP calls: unknown/mutating names, extra fields, forged approvals", len(hostile))
    record("files checked unchanged", "run tree around hostile MCP calls", len(before))


def test_evidence_tools_and_cli_change_nothing_outside_the_out_dir(run_tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    srv = Server(tmp_path, roots=[tmp_path])
    before = snapshot(tmp_path, (out, srv.audit))
    log, ckpt = str(run_tree / "train.log"), str(run_tree / "checkpoint-100")
    calls = [("read_log_tail", {"path": log}), ("read_log_window", {"path": log, "line": 10}),
             ("grep_log", {"path": log, "pattern": "loss"}), ("scan_log", {"path": log}),
             ("list_artifacts", {"path": str(run_tree)}), ("inspect_checkpoint", {"path": ckpt}),
             ("inspect_checkpoint", {"path": ckpt + "/model.pt"}), ("classify_action", {"action": "delete-checkpoint"}),
             ("read_log_tail", {"path": str(run_tree / "pipe.log")}), ("scan_log", {"path": str(run_tree / "pipe.log")}),
             ("diagnose", {"target": str(run_tree)}), ("diagnose", {"target": log})]

    async def go() -> list:
        async with srv.client() as c:
            return [await c.call_tool(n, a) for n, a in calls]

    results = anyio.run(go)
    assert [r.is_error for r in results] == [False] * 8 + [True, True] + [False, False]
    proc = run_cli("check-failed-run", log, "--artifacts", str(run_tree), "--out-dir", str(out), "--plot")
    assert proc.returncode in (0, 1), proc.stderr
    assert snapshot(tmp_path, (out, srv.audit)) == before
    assert (out / "check-failed-run.json").exists()
    record("files checked unchanged", f"tree under every evidence tool ({len(calls)} MCP calls) and the CLI with --plot", len(before))
