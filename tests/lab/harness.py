"""Run a lab scenario for real: a small training script in a child process, into a run directory.

Each scenario is a plain script under tests/lab/scenarios/ that trains (PyTorch on the CPU) and
fails the way real runs fail. `run` starts it with the run directory as its working directory,
sends stdout+stderr to train.log there (as `python train.py > train.log 2>&1` would), and
returns what happened. Nothing here writes a log by hand.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SCENARIOS = Path(__file__).parent / "scenarios"


@dataclass
class LabRun:
    run_dir: Path
    log: Path
    returncode: int
    command: list[str]


@dataclass
class LiveRun:
    """A scenario still running (one that hangs); stop() kills it and every child it forked."""

    run_dir: Path
    log: Path
    proc: subprocess.Popen

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the process and its DataLoader workers
        self.proc.wait(timeout=30)


def start_live(scenario: str, run_dir: Path, *args: str, env: dict[str, str] | None = None, log_name: str = "train.log") -> LiveRun:
    """Start tests/lab/scenarios/<scenario>.py in run_dir in its own session, without waiting for it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-u", str(SCENARIOS / f"{scenario}.py"), *args]
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    log = run_dir / log_name
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=run_dir, stdout=out, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
    (run_dir / "command.txt").write_text(" ".join(["python", f"{scenario}.py", *args]) + "\n")
    return LiveRun(run_dir=run_dir, log=log, proc=proc)


def run(scenario: str, run_dir: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 180,
        log_name: str = "train.log", preexec_fn=None) -> LabRun:
    """Run tests/lab/scenarios/<scenario>.py in run_dir; stdout and stderr go to run_dir/<log_name>."""
    run_dir.mkdir(parents=True, exist_ok=True)
    script = SCENARIOS / f"{scenario}.py"
    cmd = [sys.executable, "-u", str(script), *args]
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    log = run_dir / log_name
    with open(log, "wb") as out:
        proc = subprocess.run(cmd, cwd=run_dir, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                              timeout=timeout, preexec_fn=preexec_fn, check=False)
    (run_dir / "command.txt").write_text(" ".join(["python", f"{scenario}.py", *args]) + "\n")
    return LabRun(run_dir=run_dir, log=log, returncode=proc.returncode, command=cmd)


def start(scenario: str, run_dir: Path, *args: str, env: dict[str, str] | None = None,
          log_name: str = "train.log") -> subprocess.Popen[bytes]:
    """Like `run`, but return the running process, for scenarios where something outside the job
    (a scheduler, a person) acts on it while it trains. The caller waits for it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-u", str(SCENARIOS / f"{scenario}.py"), *args]
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    (run_dir / "command.txt").write_text(" ".join(["python", f"{scenario}.py", *args]) + "\n")
    with open(run_dir / log_name, "wb") as out:
        return subprocess.Popen(cmd, cwd=run_dir, stdout=out, stderr=subprocess.STDOUT, env=full_env)


def wait_for_line(log: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> re.Match[str]:
    """Wait until the log has a line matching `pattern`; fail if the process ends first."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if m := rx.search(text):
            return m
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (exit {proc.returncode}) before a line matched {pattern!r}:\n{text[-2000:]}")
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no line matched {pattern!r} within {timeout}s")
