"""A peer rank's late step lines are not the run going on past another rank's fatal line.

Two gloo ranks write one log. Rank 0 trains three steps and then its heap is corrupted (a native double free:
glibc aborts it). Rank 1 logs with a lag (a logger that flushes a few seconds late, as a buffered or asynchronous
logger does), so its lines for the same three steps land in the log after rank 0's abort. The run did not go on:
no step beyond the one rank 0 had reached was ever printed. Counting the peer's catch-up lines as progress read
the abort as survived and named the peer's error instead (issue 13: seen in CI under load).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.engine.test_cascades import two_ranks_abort

pytest.importorskip("torch")

RANK = textwrap.dedent("""
    import ctypes, datetime, os, sys, time
    import torch, torch.distributed as dist
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.ones(4)
    losses = []
    for step in range(3):
        dist.all_reduce(t)
        losses.append(1.0 / (step + 1))
        if rank == 0:
            print(f"rank {rank} step {step} loss {losses[-1]:.3f}", flush=True)
    if rank == 0:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc.restype = ctypes.c_void_p
        libc.free.argtypes = [ctypes.c_void_p]
        p = libc.malloc(64)
        libc.free(p)
        libc.free(p)  # glibc's allocator check aborts rank 0 (SIGABRT)
    else:
        time.sleep(8)  # the lagging logger: rank 1's step lines are written late, after rank 0 is gone
        for step, loss in enumerate(losses):
            print(f"rank {rank} step {step} loss {loss:.3f}", flush=True)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        print(f"rank {rank}: {e}".splitlines()[0], flush=True)
        os._exit(1)
""")


@pytest.mark.slow
def test_a_lagging_peers_step_lines_after_an_abort_are_not_progress(tmp_path):
    log, lines, abort = two_ranks_abort(tmp_path, RANK)
    late = [line for line in lines[abort:] if line.startswith("rank 1 step ")]
    assert len(late) == 3, lines  # the peer's three step lines really are below the abort
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "process-crash", (lines, d.primary_cause)
    assert f"train.log:{abort}: free(): " in d.root_cause.proximate, d.root_cause.proximate
    assert d.run_status.value == "crashed", d.run_status


def test_a_rank_that_went_on_past_its_own_warning_still_survived(tmp_path):
    """The control: progress that advances past the step reached before the line is the run going on."""
    script = tmp_path / "one.py"
    script.write_text(textwrap.dedent("""
        import sys
        for step in range(8):
            print(f"rank 0 step {step} loss {1.0 / (step + 1):.3f}", flush=True)
            if step == 2:
                print("RuntimeError: CUDA error: an illegal memory access was encountered (retrying the batch)",
                      flush=True)
    """))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, str(script)], stdout=out, stderr=subprocess.STDOUT, timeout=60, check=True)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value != "crashed", (d.run_status, log.read_text())
