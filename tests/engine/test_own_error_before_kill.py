"""A rank's own exception before the bare SIGKILL a launcher reports: the exception ended the run.

torchrun reports the rank it found dead, which need not be the rank that failed first. Two gloo ranks under
torchrun: rank 0 calls a name that does not exist (a NameError in the run's own code) while a non-daemon thread
holds its process open at exit (as NCCL's teardown held rank 0's in corpus 791); rank 1, blocked in the next
all-reduce, is then SIGKILLed (standing for the scheduler or the OOM killer). The launcher's summary names rank
1's 'exitcode: -9' as the root cause. No peer's death raises a NameError: the code bug is the primary cause, not
an out-of-memory kill (issue 13, corpus 791: read as oom).
"""

from __future__ import annotations

import textwrap

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.engine.test_cascades import torchrun_two_ranks

pytest.importorskip("torch")

TRAIN = textwrap.dedent("""
    import os, signal, threading, time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.all_reduce(t)
    print(f"rank {rank} step 0 loss 1.000", flush=True)
    if rank == 0:
        threading.Thread(target=time.sleep, args=(120,)).start()  # keeps the process open after the exception
        setup_logging()  # noqa: F821 - the bug: a name the script never defined
    else:
        threading.Timer(4, os.kill, (os.getpid(), signal.SIGKILL)).start()
        dist.all_reduce(t)  # blocks: rank 0 never comes
""")


@pytest.mark.slow
def test_a_name_error_before_a_peers_sigkill_is_the_cause(tmp_path):
    log = torchrun_two_ranks(tmp_path, TRAIN)
    text = log.read_text()
    lines = text.splitlines()
    assert "exitcode  : -9" in text and "Signal 9 (SIGKILL)" in text, text
    name_error = next(i for i, x in enumerate(lines, 1) if x.startswith("NameError") or x.endswith("NameError: name 'setup_logging' is not defined"))
    kill = next(i for i, x in enumerate(lines, 1) if "exitcode: -9" in x or "exitcode  : -9" in x)
    assert name_error < kill
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", (d.primary_cause, text)
    assert any(e.line_no == name_error for e in d.evidence)
