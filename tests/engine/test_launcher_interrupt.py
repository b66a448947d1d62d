"""A person's Ctrl-C on torchrun is no crash and no collective failure (batch 18, healthy 403: an accelerate run the
owner stopped at step 24 of 6172).

torchrun's elastic agent turns SIGINT into 'SignalException: Process N got signal: 2', raised in its monitor loop
(always waiting on its workers: its frames say nothing about them), then tears its workers down ('Sending process N
closing signal SIGTERM'); the workers raise KeyboardInterrupt. Nothing failed: no class, status unknown, and the
report asks why it was stopped. A real two-rank gloo run on the CPU, interrupted after its fifth step.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TRAIN = """
    import time
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for step in range(1, 10000):
        t = torch.ones(1); dist.all_reduce(t)
        if rank == 0:
            print(f"step {step} loss {1.0 / step:.4f}", flush=True)
        time.sleep(0.2)
"""

RUN = """
    {torchrun} --nproc_per_node=2 --master_port={port} train.py > train.log 2>&1 &
    pid=$!
    for i in $(seq 1 300); do grep -q "step 5 " train.log 2>/dev/null && break; sleep 0.2; done
    kill -INT $pid; wait $pid; echo "exit $?" >> train.log
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_ctrl_c_on_torchrun_is_a_person_stopping_the_run_not_a_failure(tmp_path: Path):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    subprocess.run(["bash", "-c", textwrap.dedent(RUN.format(torchrun=torchrun, port=_free_port()))], cwd=tmp_path,
                   timeout=180, check=False)
    text = (tmp_path / "train.log").read_text(errors="replace")
    assert "got signal: 2" in text and "step 5 " in text, text[-3000:]
    d = diagnose(DiagnoseRequest(target=str(tmp_path / "train.log")))
    assert d.primary_cause is None, d.primary_cause
    assert d.run_status.value == "unknown"
    assert "interrupted" in (d.insufficient_evidence or "")
