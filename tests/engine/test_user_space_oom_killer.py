"""A user-space OOM killer's kill is an out-of-memory ending, like the kernel's.

earlyoom, systemd-oomd and a sweep launcher's node-memory watchdog kill the biggest process before the kernel does,
and log their own line instead of the kernel's 'Out of memory: Killed process'. Trial 13 (docs/user-trial.md) had a
sweep run SIGKILLed by such a watchdog read only as a bare SIGKILL. Two logs below are verbatim from public reports
(cited); the third is a real CPU process that grows its memory until a real watchdog process kills it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.engine.batchcase import verdict

# rfjakob/earlyoom#131 (https://github.com/rfjakob/earlyoom/issues/131), the description's log, lines 1-9 and 15-20
EARLYOOM = """$ earlyoom -m 50,0
earlyoom v1.3-rc1-12-g8887f63
mem total: 13855 MiB, swap total:    0 MiB
sending SIGTERM when mem <= 50 % and swap <= 10 %,
        SIGKILL when mem <=  0 % and swap <=  5 %
Could not lock memory - continuing anyway: Cannot allocate memory
mem avail:  9700 of 13855 MiB (70 %), swap free:    0 of    0 MiB ( 0 %)
mem avail:  9701 of 13855 MiB (70 %), swap free:    0 of    0 MiB ( 0 %)
mem avail:  9693 of 13855 MiB (69 %), swap free:    0 of    0 MiB ( 0 %)
mem avail:  9642 of 13855 MiB (69 %), swap free:    0 of    0 MiB ( 0 %)
mem avail:  6815 of 13855 MiB (49 %), swap free:    0 of    0 MiB ( 0 %)
low memory! at or below SIGTERM limits: mem 50 %, swap 10 %
sending SIGTERM to process 12006 "python3": badness 209, VmRSS 2891 MiB
escalating to SIGKILL after 2.4 seconds
process exited after 2.8 seconds
"""

# systemd/systemd#20690 (https://github.com/systemd/systemd/pull/20690), DaanDeMeyer's comment of 2021-09-10, lines 1-9
OOMD = """Sep 10 14:59:49 image systemd-oomd[34]: Memory pressure for /testsuite.slice/testsuite-55.slice/testsuite-55-workload.slice is 64.15% > 1.00% for > 30s with reclaim activity
Sep 10 14:59:49 image systemd-oomd[34]: oomd attempting to kill 63 with KILL
Sep 10 14:59:49 image systemd-oomd[34]: oomd attempting to kill 66 with KILL
Sep 10 14:59:49 image systemd-oomd[34]: Killed /testsuite.slice/testsuite-55.slice/testsuite-55-workload.slice/testsuite-55-testbloat.service due to memory pressure for /testsuite.slice/testsuite-55.slice/testsuite-55-workload.slice be>
Sep 10 14:59:49 image systemd[1]: testsuite-55-testbloat.service: systemd-oomd killed 2 process(es) in this unit.
Sep 10 14:59:49 image systemd[1]: testsuite-55-testbloat.service: Main process exited, code=killed, status=9/KILL
Sep 10 14:59:49 image systemd[1]: testsuite-55-testbloat.service: Failed with result 'signal'.
Sep 10 14:59:49 image systemd[1]: testsuite-55-testbloat.service: Triggering OnFailure= dependencies.
Sep 10 14:59:49 image systemd[1]: testsuite-55-testbloat.service: Consumed 5.688s CPU time.
"""


def test_earlyoom_killing_a_python_process_is_an_oom(tmp_path: Path):
    log = tmp_path / "earlyoom.log"
    log.write_text(EARLYOOM)
    assert verdict(log)[0] == "oom"


def test_systemd_oomd_killing_a_unit_is_an_oom(tmp_path: Path):
    log = tmp_path / "journal.log"
    log.write_text(OOMD)
    assert verdict(log)[0] == "oom"


_TRAIN = """
import time
cache = []
for step in range(1, 100000):
    cache.append(bytearray(8 << 20))  # every batch decoded eagerly and kept
    if step % 5 == 0:
        print(f"step {step} loss {1.0 / step:.4f}", flush=True)
    time.sleep(0.01)
"""

_WATCHDOG = """
import os, signal, subprocess, sys, time
floor_mib = 256
with open("train.log", "ab", buffering=0) as out:
    child = subprocess.Popen([sys.executable, "train.py"], stdout=out, stderr=subprocess.STDOUT)
    while child.poll() is None:
        rss = 0
        for line in open(f"/proc/{child.pid}/status"):
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) // 1024
        if rss > floor_mib:
            child.send_signal(signal.SIGKILL)
            child.wait()
            out.write(f"node-watchdog: node memory low (job rss {rss} MiB > budget {floor_mib} MiB): killed the largest job train.py (pid {child.pid}) with SIGKILL\\n".encode())
            break
        time.sleep(0.05)
"""


def test_a_real_node_memory_watchdog_kill_is_an_oom_not_a_bare_sigkill(tmp_path: Path):
    (tmp_path / "train.py").write_text(_TRAIN)
    (tmp_path / "watchdog.py").write_text(_WATCHDOG)
    subprocess.run([sys.executable, "watchdog.py"], cwd=tmp_path, check=True, timeout=300)
    log = tmp_path / "train.log"
    assert "killed the largest job" in log.read_text()
    assert verdict(log) == ("oom", "crashed")
