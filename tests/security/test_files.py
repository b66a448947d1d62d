"""Files that fight back: growing, rotated, FIFOs, devices, /proc. Never a hang, never a silent half answer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ml_skills.engine.read.scan import scan_log
from ml_skills.errors import MLSkillsError, PathNotAllowed
from ml_skills.models import EvidenceStatus
from ml_skills.safety.paths import confine, normalise_roots

from tests.conftest import run_cli
from tests.security.figures import record

WRITER = """
import os, sys, time
path, mode = sys.argv[1], sys.argv[2]
i = 0
line = b"step %d | loss 0.5 | grad_norm 1.0 | padding " + b"x" * 200 + b"\\n"
while True:
    if mode == "grow":
        with open(path, "ab") as f:
            f.write(b"".join(line % (i + k) for k in range(50)))
    else:  # rotate: write a new file beside it and rename it over the log, as logrotate's create mode does
        with open(path + ".new", "wb") as f:
            f.write(b"".join(line % k for k in range(8000)))
        os.replace(path + ".new", path)
    i += 50
    time.sleep(0.01)
"""


@pytest.fixture
def writer(tmp_path: Path):
    procs: list[subprocess.Popen[bytes]] = []

    def start(mode: str) -> Path:
        log = tmp_path / "train.log"
        log.write_bytes(b"".join(b"step %d | loss 0.5 | grad_norm 1.0 | padding %s\n" % (k, b"x" * 200) for k in range(8000)))
        before = log.stat()
        procs.append(subprocess.Popen([sys.executable, "-c", WRITER, str(log), mode]))
        end = time.monotonic() + 60  # a loaded machine can start the writer late: wait for its first write
        while time.monotonic() < end:
            now = log.stat()
            if (now.st_ino, now.st_size, now.st_mtime_ns) != (before.st_ino, before.st_size, before.st_mtime_ns):
                break
            time.sleep(0.02)
        return log

    yield start
    for p in procs:
        p.kill()
        p.wait(timeout=10)


@pytest.mark.parametrize("mode", ["grow", "rotate"])
def test_a_log_changing_during_the_pass_is_flagged_changed(writer, mode: str) -> None:
    log = writer(mode)
    ev = scan_log(log)
    assert ev.changed and ev.status is EvidenceStatus.PARTIAL
    assert any("changed while it was read" in p for p in ev.problems)
    assert ev.total_lines >= 7000 and ev.trajectory.last_step is not None  # still a consistent answer
    record("hostile inputs", "a log growing or rotated during the read", 1)


def test_a_log_at_rest_is_not_flagged(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1 | loss 0.5\n" * 1000)
    ev = scan_log(log)
    assert not ev.changed and not ev.problems


@pytest.mark.parametrize("target", ["fifo", "/dev/zero", "/dev/urandom", "/proc/self/environ", "/proc/self/cmdline", "/sys/kernel/notes"])
def test_special_and_kernel_files_are_refused_at_once_by_the_cli(tmp_path: Path, target: str) -> None:
    if target == "fifo":
        target = str(tmp_path / "train.log")
        os.mkfifo(target)  # opening it would block until a writer came: it must never be opened
    t0 = time.monotonic()
    proc = run_cli("check-failed-run", target, "--out-dir", str(tmp_path / "out"), timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "never read" in proc.stderr or "not a regular file" in proc.stderr or "directory" in proc.stderr
    assert time.monotonic() - t0 < 30
    record("hostile inputs", "FIFO, devices, /proc and /sys given to the CLI", 1)


@pytest.mark.parametrize("spelling", ["/proc/self/environ", "/proc/1/cmdline", "/dev/stdin", "/sys/kernel/notes"])
def test_kernel_trees_are_refused_even_when_a_root_contains_them(spelling: str) -> None:
    with pytest.raises(MLSkillsError):
        confine(spelling, normalise_roots(["/"]))
    record("hostile inputs", "kernel-tree paths under an allowed root", 1)


def test_a_symlink_to_proc_inside_a_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "env.log").symlink_to("/proc/self/environ")
    with pytest.raises(PathNotAllowed, match="under /proc"):
        confine(str(tmp_path / "env.log"), normalise_roots([tmp_path, "/"]))
