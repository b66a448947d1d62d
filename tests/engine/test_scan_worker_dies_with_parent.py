"""A forked scan worker ends when the process that forked it is SIGKILLed (issue 14's twenty-seventh round: a CLI killed
at an agent's timeout left its parallel scan's workers running, each scanning its range to the end for nobody).

Real processes: a parent forks a worker that arms itself as parallel.run's workers do and then waits as a long range scan would; the test
SIGKILLs the parent (no cleanup of its runs) and the worker must be gone, not left waiting out its minute."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PARENT = """
import os, sys, time
from ml_skills.engine.read import parallel
parent = os.getpid()
pid = os.fork()
if pid == 0:
    arm = getattr(parallel, "_die_with", None)  # what parallel.run calls in each worker it forks
    if sys.argv[1] == "armed" and arm is not None:
        arm(parent)
    time.sleep(60)  # a range that takes a minute to scan
    os._exit(0)
print(pid, flush=True)
time.sleep(60)
"""


def _state(pid: int) -> str | None:
    """The process's state letter, None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _worker_after_parent_killed(mode: str) -> str | None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root / 'server'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-c", PARENT, mode], stdout=subprocess.PIPE, text=True, env=env)
    try:
        worker = int(proc.stdout.readline())
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        for _ in range(100):
            state = _state(worker)
            if state in (None, "Z"):
                return state
            time.sleep(0.05)
        return _state(worker)
    finally:
        proc.kill()
        with __import__("contextlib").suppress(Exception):
            os.kill(worker, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_scan_worker_ends_when_its_parent_is_killed():
    assert _worker_after_parent_killed("armed") in (None, "Z")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_without_it_the_worker_outlives_its_parent():
    """The control: the same worker not armed is still there when the armed one is long gone."""
    assert _worker_after_parent_killed("bare") not in (None, "Z")
