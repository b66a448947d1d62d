"""Issue 14's thirty-eighth round: an outside tester's attacks (a helper session that did not write this code). Each
test drives the server over stdio with a real MCP client that accepts, and a real child process; each failed on the
code before its fix (docs/security.md, "Thirty-eighth round"): a recorded launcher was judged by its resolved path in
the server and then started by its recorded name in the child, so a name whose meaning depends on the process
(`/proc/self/cwd/python`: the server's folder in the check, the run folder in the child) or a relative entry of the
server's PATH (looked up in the run folder once the child has changed into it) started a script of that name."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Server, answer, text
from tests.security.test_ninth_round import _wait_for

pytestmark = pytest.mark.slow  # real child processes


def _run_folder(tmp_path: Path, command: str) -> Path:
    """root/run with a harmless train.py, a script called python beside it and in bin/, and the recorded command."""
    run = tmp_path / "root" / "run"
    (run / "bin").mkdir(parents=True)
    (run / "train.py").write_text(f"open({str(tmp_path / 'TRAINED')!r}, 'w').write('ok')\n")
    for script in (run / "python", run / "bin" / "python"):
        script.write_text(f"#!/bin/sh\necho pwned > {tmp_path / 'PWNED'}\n")
        script.chmod(0o755)
    (run / "command.txt").write_text(command + "\n")
    return run


def _restart(tmp_path: Path, run: Path) -> str:
    person = answer("accept")
    got: list[str] = []

    async def go() -> None:
        async with Server(tmp_path, roots=[tmp_path / "root"]).client(elicit=person) as c:
            got.append(text(await c.call_tool("request_action", {"action": {"kind": "restart-unchanged",
                                                                              "command_file": str(run / "command.txt")}})))

    anyio.run(go)
    return got[0]


def test_a_launcher_named_through_proc_self_is_refused(tmp_path: Path) -> None:
    """Promise 2: `/proc/self/cwd/python train.py`, the server's working folder holding `python` -> its own Python, the
    run folder a script of that name; the person accepts. The script ran: /proc/self is another process in the child."""
    (tmp_path / "python").symlink_to(os.path.realpath(sys.executable))  # the server's cwd is tmp_path
    run = _run_folder(tmp_path, "/proc/self/cwd/python train.py")
    got = _restart(tmp_path, run)
    _wait_for(tmp_path / "PWNED", 3)
    assert not (tmp_path / "PWNED").exists(), got
    assert "names another file in each process" in got, got


def test_a_relative_entry_of_the_servers_path_is_never_looked_up_in_the_run_folder(tmp_path: Path, monkeypatch) -> None:
    """Promise 2: the server started in a project whose bin/python is its own Python, with `bin` (relative) first on
    its PATH, as a careless shell profile leaves it; `python train.py` recorded; the run folder holds bin/python, a
    script. The check found the real python as `bin/python`, the child started `bin/python` from the run folder."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(os.path.realpath(sys.executable))  # the server's cwd is tmp_path
    monkeypatch.setenv("PATH", "bin" + os.pathsep + os.environ["PATH"])
    run = _run_folder(tmp_path, "python train.py")
    got = _restart(tmp_path, run)
    _wait_for(tmp_path / "TRAINED")
    assert (tmp_path / "TRAINED").exists(), got  # the recorded launch ran, with the Python that was checked
    assert not (tmp_path / "PWNED").exists(), got
