"""A job killed by a memory watchdog reads as out of memory (the twelfth user trial's case05, which the engine left
'running' with no cause): a supervisor that polls the job's RSS, says it passed the limit, SIGKILLs it and reports the
signal, as a scheduler's or a team's own watchdog does ('rss 1008 MiB exceeds the limit of 1000 MiB; sending SIGKILL',
'exited with signal 9'). A real child process and a real kill; the same supervisor over a job that stays under the limit
reports a clean exit and no failure."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.engine.batchcase import verdict

_JOB = textwrap.dedent("""
    import sys, time
    keep = []
    for step in range(1, int(sys.argv[1]) + 1):
        keep.append(bytearray(8 * 1024 * 1024))  # every step's buffers kept: memory grows with the steps
        print(f"step {step}/60 | loss {2.0 / step:.4f} | lr 1.0e-03", flush=True)
        time.sleep(0.05)
""")

_WATCHDOG = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    limit = 200
    job = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
    peak = 0
    while job.poll() is None:
        try:
            with open(f"/proc/{job.pid}/status") as f:
                rss = next(int(x.split()[1]) // 1024 for x in f if x.startswith("VmRSS:"))
        except (OSError, StopIteration):
            rss = 0
        peak = max(peak, rss)
        if rss > limit:
            print(f"monitor: job pid {job.pid} rss {rss} MiB exceeds the limit of {limit} MiB; sending SIGKILL", flush=True)
            job.send_signal(signal.SIGKILL)
            job.wait()
            break
        time.sleep(0.02)
    if job.returncode < 0:
        print(f"monitor: job pid {job.pid} exited with signal {-job.returncode} (peak rss {peak} MiB)", flush=True)
    else:
        print(f"monitor: job pid {job.pid} exited with status {job.returncode}", flush=True)
""")


def _supervised(tmp_path: Path, steps: int) -> Path:
    log = tmp_path / f"train-{steps}.log"
    with log.open("w") as f:
        subprocess.run([sys.executable, "-c", _WATCHDOG, _JOB, str(steps)], stdout=f, stderr=subprocess.STDOUT, timeout=120,
                       check=True)
    return log


def test_a_job_the_watchdog_kills_at_its_memory_limit_is_oom(tmp_path: Path) -> None:
    log = _supervised(tmp_path, 60)
    text = log.read_text()
    assert "sending SIGKILL" in text and "exited with signal 9" in text
    assert verdict(log) == ("oom", "crashed")


def test_the_same_watchdog_over_a_job_under_its_limit_reports_no_failure(tmp_path: Path) -> None:
    log = _supervised(tmp_path, 5)
    assert "exited with status 0" in log.read_text()
    assert verdict(log)[0] is None


_TIMED = """#!/bin/bash
timeout -s KILL 2 python -c "
import time
for s in range(1, 100):
    print(f'step {s}/99 | loss {1 / s:.4f}', flush=True); time.sleep(0.1)
"
echo "job exited with status $?"
"""


def test_a_job_its_time_limit_killed_is_not_out_of_memory(tmp_path: Path) -> None:
    """bash's job line names the command it lost ('Killed  timeout -s KILL 2 python ...'): the kill is the time limit,
    and the exit status 137 printed after it is that kill (the twelfth trial's case06, read with an OOM hint)."""
    script = tmp_path / "job.sh"
    script.write_text(_TIMED)
    log = tmp_path / "train.log"
    with log.open("w") as f:
        subprocess.run(["bash", str(script)], stdout=f, stderr=subprocess.STDOUT, timeout=60, check=True)
    text = log.read_text()
    assert "Killed" in text and "timeout -s KILL 2" in text and "status 137" in text
    cls, status = verdict(log)
    assert cls != "oom" and status == "crashed"
