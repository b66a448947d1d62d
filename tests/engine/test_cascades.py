"""Cascades run for real: the first failure of a multi-process run must lead, not the reactions after it.

Each log is written by real processes sharing one log file: two gloo ranks where rank 0's heap is
corrupted (a native double free, so glibc aborts it) and rank 1 then logs the error its pending
all-reduce gets from the dead peer, and the same run under torchrun, whose agent then SIGTERMs
rank 1 and reports rank 0's exit code -6.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")

RANK = textwrap.dedent("""
    import ctypes, datetime, os, sys, time
    import torch, torch.distributed as dist
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.ones(4)
    for step in range(3):
        dist.all_reduce(t)
        if rank == 0:
            print(f"step {step} loss {1.0 / (step + 1):.3f}", flush=True)
    if rank == 0:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc.restype = ctypes.c_void_p
        libc.free.argtypes = [ctypes.c_void_p]
        p = libc.malloc(64)
        libc.free(p)
        libc.free(p)  # a double free: glibc's allocator check aborts the process (SIGABRT)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:  # how a trainer that logs and exits reports the dead peer
        print(f"rank {rank}: {e}".splitlines()[0], flush=True)
        os._exit(1)  # not sys.exit: gloo's threads still running at teardown make C++ abort ('terminate called') under load
""")

TORCHRUN = textwrap.dedent("""
    import ctypes, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(4)
    for step in range(3):
        dist.all_reduce(t)
        print(f"rank {dist.get_rank()} step {step} loss {1.0 / (step + 1):.3f}", flush=True)
    # every rank's step lines are written before rank 0 aborts: under load rank 1 once printed its last two steps
    # after rank 0's abort, which reads as training going on past it (a peer's progress; see issue 13's note)
    dist.barrier()
    if dist.get_rank() == 0:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc.restype = ctypes.c_void_p
        libc.free.argtypes = [ctypes.c_void_p]
        p = libc.malloc(64)
        libc.free(p)
        libc.free(p)
    dist.all_reduce(t)
    time.sleep(30)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _glibc_aborts_on_double_free(tmp_path: Path) -> bool:
    probe = "import ctypes; l = ctypes.CDLL('libc.so.6'); l.malloc.restype = ctypes.c_void_p; " \
            "l.free.argtypes = [ctypes.c_void_p]; p = l.malloc(64); l.free(p); l.free(p)"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False)
    return r.returncode == -6 and "free(): " in r.stderr


def two_ranks_abort(tmp_path: Path, script_text: str) -> tuple[Path, list[str], int]:
    """Two ranks of `script_text` (argv: rank, port) writing to one train.log, where rank 0 aborts on a double
    free (exit -6) and rank 1 fails after it (exit 1): the log, its lines and the 1-based line of glibc's abort."""
    if not _glibc_aborts_on_double_free(tmp_path):
        pytest.skip("this C library does not abort on a double free")
    script = tmp_path / "rank.py"
    script.write_text(script_text)
    port = _free_port()
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        procs = [subprocess.Popen([sys.executable, str(script), str(r), str(port)], stdout=out, stderr=subprocess.STDOUT)
                 for r in (0, 1)]
        codes = [p.wait(timeout=120) for p in procs]
    lines = log.read_text().splitlines()
    assert codes == [-6, 1], lines
    return log, lines, next(i for i, line in enumerate(lines, 1) if line.startswith("free(): "))


def test_a_heap_abort_leads_the_peer_error_logged_on_the_next_line(tmp_path):
    log, lines, abort = two_ranks_abort(tmp_path, RANK)
    assert lines[abort].startswith("rank 1: "), lines  # the peer's reaction right below the abort
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "process-crash", (lines, d.primary_cause)
    assert f"train.log:{abort}: free(): " in d.root_cause.proximate, d.root_cause.proximate


def torchrun_two_ranks(tmp_path: Path, script_text: str) -> Path:
    """Run a script as two ranks under torchrun in tmp_path; its agent's and both ranks' output in train.log."""
    script = tmp_path / "train.py"
    script.write_text(script_text)
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                        "--master_port", str(_free_port()), str(script)],
                       stdout=out, stderr=subprocess.STDOUT, timeout=180, check=False, cwd=tmp_path)
    return log


def test_a_heap_abort_under_torchrun_is_quoted_above_the_agents_summary(tmp_path):
    if not _glibc_aborts_on_double_free(tmp_path):
        pytest.skip("this C library does not abort on a double free")
    log = torchrun_two_ranks(tmp_path, TORCHRUN)
    text = log.read_text()
    assert "exitcode  : -6" in text and "Root Cause (first observed failure)" in text, text
    abort = next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith("free(): "))
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "process-crash"
    assert f"train.log:{abort}: free(): " in d.root_cause.proximate, d.root_cause.proximate
