"""Next commands fitted to how the run died: a core's stack, the kernel's record of a crash or a kill, a live stack.

Real logs: corpus cases (tests/corpus/*/case.json cites each thread), a real Python process crashed by a
NULL read (the shell's own 'Segmentation fault' line, no core: ulimit -c 0), and a real stalled training
process (tests/collectors/procs/train.py) read through the process collector while it hangs.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

CORPUS = Path(__file__).parents[1] / "corpus"
TRAIN = Path(__file__).parents[1] / "collectors" / "procs" / "train.py"


def _commands(prefix: str) -> list[str]:
    case = next(p for p in CORPUS.iterdir() if p.name.startswith(prefix))
    return diagnose(DiagnoseRequest(target=str(case / "train.log"))).next_commands


@pytest.mark.parametrize("prefix", ["012-", "475-"])
def test_core_dumped_gets_the_cores_stack(prefix: str) -> None:
    cmds = _commands(prefix)
    assert any(c.startswith("coredumpctl list") and "coredumpctl info" in c for c in cmds), cmds
    assert any(c.startswith("gdb -batch -ex 'thread apply all bt'") for c in cmds), cmds


@pytest.mark.parametrize("prefix", ["229-", "546-"])
def test_illegal_instruction_gets_the_cpus_extensions(prefix: str) -> None:
    cmds = _commands(prefix)
    assert any("/proc/cpuinfo" in c and "avx2" in c for c in cmds), cmds


def test_a_gpu_illegal_instruction_is_not_a_cpu_one() -> None:
    """CUDA's 'an illegal instruction was encountered' is a kernel fault on the GPU: no CPU-extension check."""
    assert not any("/proc/cpuinfo" in c for c in _commands("210-"))


def test_bus_error_of_a_full_shm_gets_no_segfault_search() -> None:
    """A DataLoader worker's bus error is /dev/shm running out (oom): its commands, not a native-crash hunt."""
    assert not any("segfault at" in c or "coredumpctl" in c for c in _commands("153-"))


@pytest.mark.parametrize("prefix", ["295-", "509-"])
def test_a_kill_gets_the_kernel_log_around_the_logs_last_time(prefix: str) -> None:
    case = next(p for p in CORPUS.iterdir() if p.name.startswith(prefix))
    stamps = re.findall(r"(20\d\d-[01]\d-[0-3]\d)[ T_]([0-2]\d:[0-5]\d)", (case / "train.log").read_text(errors="replace"))
    last = " ".join(stamps[-1])
    cmd = next(c for c in _commands(prefix) if c.startswith("journalctl -k"))
    since, until = re.search(r"--since '([^']+)' --until '([^']+)'", cmd).groups()
    assert since < last < until, (cmd, last)


def test_a_real_segfault_without_a_core_asks_the_kernel_which_library(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    crash = f"{sys.executable} -c 'import ctypes; print(\"step 1 | loss 0.5\", flush=True); ctypes.string_at(0)'"
    with open(log, "wb") as out:
        subprocess.run(["bash", "-c", f"ulimit -c 0; {crash}; true"], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, timeout=60, check=False)
    text = log.read_text()
    assert "Segmentation fault" in text and "core dumped" not in text, text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "process-crash"
    assert any(c.startswith("dmesg -T | grep -E 'segfault at") for c in d.next_commands), d.next_commands
    assert not any("coredumpctl" in c for c in d.next_commands)


@pytest.mark.slow
def test_a_live_hang_gets_the_stack_of_that_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        p = subprocess.Popen([sys.executable, "-u", str(TRAIN), "stall"], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        end = time.monotonic() + 30
        while "step 20 " not in log.read_text() and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(1.2)
        monkeypatch.setenv("ML_SKILLS_STALL_AFTER", "0.5")
        monkeypatch.setenv("ML_SKILLS_PROC_SAMPLE", "0.6")
        d = diagnose(DiagnoseRequest(pid=p.pid))
    finally:
        p.kill()
        p.wait()
    assert d.primary_cause is not None and d.primary_cause.value == "stalled"
    assert f"py-spy dump --pid {p.pid}   # " in d.next_commands[0], d.next_commands
    assert next(f for f in d.fixes if f.fix_id == "dump-stacks").command.startswith(f"py-spy dump --pid {p.pid} ")
