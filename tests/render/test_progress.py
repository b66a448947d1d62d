"""Progress on stderr: shown when stderr is a real terminal (a pseudo-terminal here), never when
piped, never from the MCP server. The real CLI and server run as children; nothing is patched."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from ..conftest import ROOT

NAN_LOG = ROOT / "examples" / "nan-loss" / "train.log"
SLOW_TRAIN = ROOT / "tests" / "checks" / "scenarios" / "slow_train.py"
CLI = [sys.executable, "-m", "ml_skills.cli"]


@pytest.fixture
def big_log(tmp_path: Path) -> Path:
    """The real NaN run's log repeated to ~10 MB: three chunks of the streaming pass."""
    log = tmp_path / "train.log"
    with open(log, "wb") as f:
        f.writelines([NAN_LOG.read_bytes()] * 8500)
    return log


def _on_pty(argv: list[str], timeout: float = 120) -> tuple[int, str, str]:
    """Run argv with stderr on a fresh pseudo-terminal (stdout piped); return (code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = bytearray()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            seen.extend(chunk)
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode() if proc.stdout else ""
    code = proc.wait(timeout=10)
    os.close(master)
    return code, out, seen.decode(errors="replace")


def _piped(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)


def test_scan_shows_progress_on_a_terminal_and_clears_it(big_log, tmp_path):
    code, out, term = _on_pty([*CLI, "check-failed-run", str(big_log), "--out-dir", str(tmp_path)])
    assert code == 0, term
    assert "scanning train.log: 4.0 MiB of" in term and "(100%)" in term
    assert term.endswith("\r\x1b[K")  # the status line is erased before the report
    assert "Primary cause: nan-inf" in out and "scanning" not in out  # stdout carries only the report


def test_piped_stderr_gets_no_progress(big_log, tmp_path):
    proc = _piped([*CLI, "check-failed-run", str(big_log), "--out-dir", str(tmp_path)])
    assert proc.returncode == 0
    assert proc.stderr == ""
    assert "Primary cause: nan-inf" in proc.stdout


@pytest.fixture
def live_log(tmp_path: Path):
    """A real, slow, healthy training run writing its log while it is watched."""
    log = tmp_path / "live.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, "-u", str(SLOW_TRAIN), "--mode", "healthy", "--steps", "2000", "--step-seconds", "0.05"],
                                stdout=f, stderr=subprocess.STDOUT)
        try:
            while "step 3 " not in log.read_text():
                time.sleep(0.1)
            yield log
        finally:
            proc.kill()
            proc.wait()


def test_watch_counts_down_to_the_next_poll_on_a_terminal(live_log):
    code, out, term = _on_pty([*CLI, "watch-run", str(live_log), "--interval", "2", "--max-polls", "2", "--stall-after", "60"])
    assert code == 0, out + term
    assert "poll 1 done, next poll: " in term and "s of 2 s" in term
    assert "progress: step" in out and "done: stopped after 2 polls" in out
    assert "next poll" not in out


def test_watch_piped_stays_quiet(live_log):
    proc = _piped([*CLI, "watch-run", str(live_log), "--interval", "2", "--max-polls", "2", "--stall-after", "60"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == "" and "progress: step" in proc.stdout


def test_mcp_server_on_a_terminal_shows_no_progress(big_log, tmp_path):
    """Even when the server's stderr is a terminal, tool calls scan without a status line."""
    master, slave = pty.openpty()
    errlog = os.fdopen(slave, "w")
    params = StdioServerParameters(command=sys.executable, args=["-m", "ml_skills.mcp_tools.app", "--allow-root", str(tmp_path),
                                                                 "--audit-log", str(tmp_path / "audit.jsonl")],
                                   env=dict(os.environ), cwd=str(tmp_path))

    async def go() -> None:
        async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as c:
            for name in ("scan_log", "diagnose"):
                r = await c.call_tool(name, {"path": str(big_log)} if name == "scan_log" else {"target": str(big_log)})
                assert not r.is_error, name

    anyio.run(go)
    errlog.close()
    seen = bytearray()
    while select.select([master], [], [], 0.2)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen.extend(chunk)
    os.close(master)
    assert b"scanning" not in seen and b"\r" not in seen.replace(b"\r\n", b"")
