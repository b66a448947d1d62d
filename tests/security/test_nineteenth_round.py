"""Issue 14's nineteenth round: attacks from outside on every path to a mutating effect (request_action's arguments, thread
ids, answers sent twice, racing replays), on paths the server cannot search (run without the capabilities that let root
read every folder), on tracker fakes that never stop paging, and fresh ones on every promise.

Each test is one family of attacks that broke a claim of docs/security.md, driven through a real MCP client over stdio or the
CLI in a child process, with real processes, files and a hostile HTTP server; each failed on the code before its fix (see
docs/security.md, "Nineteenth round").
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters, types

from tests.mcp.conftest import ROOT, Server, answer, server_cmd, text

pytestmark = pytest.mark.slow  # real child processes and servers

# Root reads every folder through CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH; without them a folder of mode 000 (or another
# user's 700) cannot be searched, as for any user who runs the server.
_NO_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search"]
_CAN_DROP = os.geteuid() == 0 and shutil.which("setpriv") is not None
_THREAD = """
import ctypes, threading, time
def worker():
    ctypes.CDLL(None).prctl(15, b"harmless-sleep", 0, 0, 0)
    print(threading.get_native_id(), flush=True)
    time.sleep(120)
threading.Thread(target=worker, daemon=True).start()
time.sleep(120)
"""


def _safetensors(path: Path) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)


async def _call(srv: Server, calls: list[tuple[str, dict[str, object]]], elicit: object = None,
                unprivileged: bool = False) -> list[tuple[bool, str]]:
    """Each call's (is_error, text) from one real MCP stdio client; `unprivileged` runs the server without DAC overrides."""
    cmd = server_cmd(*srv.args())
    if unprivileged:
        cmd = [*_NO_DAC, *cmd]
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=dict(os.environ), cwd=str(srv.tmp))
    got: list[tuple[bool, str]] = []
    async with Client(params, elicitation_callback=elicit, read_timeout_seconds=120) as c:
        for tool, args in calls:
            res = await c.call_tool(tool, args)
            got.append((bool(res.is_error), text(res)))
    return got


def test_kill_worker_never_signals_a_process_through_the_id_of_one_of_its_threads(tmp_path: Path) -> None:
    """Promise 2: the person approves exactly the action. kill(2) on a thread's id signals its whole process; before the
    nineteenth round `kill-worker` on the id of a thread of another process asked about "pid N (process name
    'harmless-sleep')", the name the process gave that thread, and after an accept the process (another pid) ended. Now a
    thread's id is refused, naming the process it belongs to, and nothing is asked; the process itself can still be asked for."""
    victim = subprocess.Popen([sys.executable, "-c", _THREAD], stdout=subprocess.PIPE, text=True)
    try:
        tid = int(victim.stdout.readline())  # type: ignore[union-attr]
        assert tid != victim.pid
        person = answer("accept")
        srv = Server(tmp_path)
        [(err, said)] = anyio.run(lambda: _call(srv, [("request_action", {"action": {"kind": "kill-worker", "pid": tid}})], person))
        time.sleep(0.5)
        assert victim.poll() is None, "the process ended through its thread's id"
        assert err and f"thread of process {victim.pid}" in said and person.shown == []  # type: ignore[attr-defined]
        assert [e["outcome"] for e in srv.audit_entries()] == ["invalid"]
        [(err, said)] = anyio.run(lambda: _call(srv, [("request_action", {"action": {"kind": "kill-worker", "pid": victim.pid}})],
                                                person))
        assert not err and '"ran":true' in said and victim.wait(timeout=10) is not None
    finally:
        victim.kill()
        victim.wait(timeout=10)


@pytest.mark.skipif(not _CAN_DROP, reason="needs root and setpriv to run the server without DAC overrides")
def test_a_pointer_on_a_checkpoint_in_a_folder_the_server_cannot_search_is_a_rollback_and_asks(tmp_path: Path) -> None:
    """Promise 2: only a pointer whose target is missing or inspects invalid is moved without asking; a target the server
    cannot look at is not known to be bad (ninth round). Before the nineteenth round `os.path.lexists`, False on any error,
    read a checkpoint in a folder the server cannot search (mode 000 here; another user's 700) as missing, and the pointer on
    it was moved to an older checkpoint as a safe repoint, asked of no one. Now it is a rollback: the person is asked, and a
    decline leaves the pointer as it was. A target really missing is still moved unasked."""
    root = tmp_path / "root"
    (root / "run").mkdir(parents=True)
    (root / "locked").mkdir()
    _safetensors(root / "locked" / "good.safetensors")
    _safetensors(root / "run" / "old.safetensors")
    pointer = root / "run" / "latest"
    before = f"{root / 'locked' / 'good.safetensors'}\n"
    pointer.write_text(before)
    (root / "run" / "latest_gone").write_text(f"{root / 'run' / 'gone.safetensors'}\n")
    srv = Server(tmp_path, roots=[root])
    person = answer("decline")
    os.chmod(root / "locked", 0)
    try:
        got = anyio.run(lambda: _call(srv, [
            ("request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": str(pointer),
                                           "checkpoint": str(root / "run" / "old.safetensors")}}),
            ("request_action", {"action": {"kind": "repoint-checkpoint", "pointer_file": str(root / "run" / "latest_gone"),
                                           "checkpoint": str(root / "run" / "old.safetensors")}}),
        ], person, unprivileged=True))
    finally:
        os.chmod(root / "locked", 0o755)
    assert pointer.read_text() == before, "the pointer was moved off a checkpoint the server could not look at"
    assert '"outcome":"decline"' in got[0][1] and "rollback" in got[0][1] and len(person.shown) == 1  # type: ignore[attr-defined]
    assert '"outcome":"ran"' in got[1][1] and '"risk":"safe"' in got[1][1]


def test_a_link_out_of_the_roots_gets_one_answer_into_a_loop_or_a_folder_the_server_cannot_search(tmp_path: Path) -> None:
    """Promise 5: a link in the roots that leads out of them gets one answer, "outside the allowed roots", whatever is there
    (tenth and eighteenth rounds). Before the nineteenth round a link out into a symlink loop answered "cannot resolve ...:
    Symlink loop from '/elsewhere/loop'" (where the link leads, and that a loop is there), and, for a server that cannot
    search every folder, one into such a folder answered "Permission denied" (a folder is there, against one that is not).
    A loop inside the roots is still named as a loop, never by where it loops."""
    root, out = tmp_path / "root", tmp_path / "elsewhere-payroll"
    (root / "run").mkdir(parents=True)
    (out / "open").mkdir(parents=True)
    (out / "locked" / "in").mkdir(parents=True)
    (out / "locked" / "in" / "f.log").write_text("x\n")
    (out / "open" / "f.log").write_text("x\n")
    (out / "loop").symlink_to(out / "loop")
    (root / "run" / "selfloop").symlink_to(root / "run" / "selfloop")
    links = {"open": out / "open" / "f.log", "gone": out / "open" / "missing.log", "loop": out / "loop" / "f.log",
             "locked": out / "locked" / "in" / "f.log", "locked-gone": out / "locked" / "missing.log"}
    for name, target in links.items():
        (root / f"l-{name}").symlink_to(target)
    srv = Server(tmp_path, roots=[root])
    calls = [("read_log_tail", {"path": str(root / f"l-{n}")}) for n in links] + [
        ("grep_log", {"path": str(root / "l-loop"), "pattern": "x"}), ("read_log_tail", {"path": str(root / "run" / "selfloop")})]
    os.chmod(out / "locked", 0)
    try:
        got = anyio.run(lambda: _call(srv, calls, unprivileged=_CAN_DROP))
    finally:
        os.chmod(out / "locked", 0o755)
    for (err, said), (tool, args) in zip(got[:-1], calls[:-1]):
        assert err and "outside the allowed roots" in said, (args, said)
        assert "elsewhere-payroll" not in said and "Permission denied" not in said and "loop" not in said.replace(str(args["path"]), "")
    err, said = got[-1]
    assert err and "symlink loop" in said and "outside" not in said


def test_a_declined_question_sent_back_with_accept_never_runs(tmp_path: Path) -> None:
    """Promise 2: once, for exactly that action. On the 2026-07-28 protocol the question rides a sealed request state with a
    one-time nonce; only an accept spent it, so a question the person declined, sent back with "accept" in place of the
    decline, ran the action (one question, two answers). Now any answer spends it: the second answer is `replayed`, and a
    new request asks the person again. Twenty replays of one accept raced on one session still run it once."""
    code = "import signal, time; signal.signal(signal.SIGHUP, lambda *a: print('HUP', flush=True)); time.sleep(120)"
    victim = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    accept = {"approval": types.ElicitResult(action="accept", content={"approve": True})}
    kill = {"action": {"kind": "kill-worker", "pid": victim.pid, "signal": "HUP"}}
    srv = Server(tmp_path)

    async def go() -> tuple[list[str], list[str]]:
        second: list[str] = []
        raced: list[str] = []
        async with srv.client(elicit=answer("accept")) as c:
            for no in ({"approval": types.ElicitResult(action="decline")}, {"approval": types.ElicitResult(action="cancel")},
                       {"approval": types.ElicitResult(action="accept", content={"approve": False})}):
                asked = await c.session.call_tool("request_action", kill, allow_input_required=True)
                state = asked.request_state
                first = await c.session.call_tool("request_action", kill, request_state=state, input_responses=no)
                again = await c.session.call_tool("request_action", kill, request_state=state, input_responses=accept)
                second += [first.structured_content["outcome"], again.structured_content["outcome"]]
            asked = await c.session.call_tool("request_action", kill, allow_input_required=True)

            async def one() -> None:
                r = await c.session.call_tool("request_action", kill, request_state=asked.request_state, input_responses=accept)
                raced.append(r.structured_content["outcome"])

            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(one)
        return second, raced

    try:
        second, raced = anyio.run(go)
        time.sleep(0.5)
    finally:
        victim.kill()
    hups = victim.communicate(timeout=10)[0].count("HUP")
    assert second == ["decline", "replayed", "cancel", "replayed", "decline", "replayed"], second
    assert sorted(raced) == ["ran"] + ["replayed"] * 19 and hups == 1, (raced, hups)


class _EndlessHistory(BaseHTTPRequestHandler):
    """An MLflow server whose metric history always has a next page of 25,000 points."""

    protocol_version = "HTTP/1.1"
    page = json.dumps({"metrics": [{"key": "loss", "value": 1.0 + i, "timestamp": 1_700_000_000_000 + i, "step": i}
                                   for i in range(25_000)], "next_page_token": "more"}).encode()

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if "runs/get" in self.path:
            body = json.dumps({"run": {"info": {"status": "FAILED"}, "data": {"metrics": [{"key": "loss", "value": 1.0}]}}}).encode()
        elif "get-history" in self.path:
            body = self.page
        else:
            body = b'{"files": []}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def endless_mlflow() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _EndlessHistory)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_an_mlflow_server_whose_metric_history_never_ends_is_cut_in_bounded_memory(tmp_path: Path, endless_mlflow: str) -> None:
    """Promises 7 and 9: a remote source answers within its deadline, in memory bounded by a cap. The history was paged
    until the server stopped sending a next_page_token, every page kept as parsed dicts: a server that never stopped took
    2.6 GB within the 60 s deadline over loopback (about 1 GB in the 20 s here). Now a metric's history is cut at 500,000
    points (1,000,000 over a run), kept as tuples, and the cut is named."""
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT / "server")), "MLFLOW_TRACKING_URI": endless_mlflow,
           "ML_SKILLS_TRACKER_TIMEOUT": "20"}
    out = tmp_path / "stdout.json"
    with out.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "ml_skills.cli", "check-failed-run", "--mlflow", "abc", "--format", "json",
                                 "--out-dir", str(tmp_path)], stdout=fh, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path)
        peak_mib = _peak_rss_mib(proc)
    assert peak_mib < 600, f"peak {peak_mib:.0f} MiB"
    assert "history of loss: cut at 500,000 points" in out.read_text(), out.read_text()[:2000]


def _peak_rss_mib(proc: subprocess.Popen[bytes]) -> float:
    """The child's largest resident size, sampled every 50 ms until it ends (its own, not the forked test process's)."""
    import psutil

    peak = 0
    child = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peak = max(peak, child.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.05)
    proc.wait(timeout=120)
    return peak / 2**20
