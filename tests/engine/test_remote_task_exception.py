"""A Ray task's own exception decides, not the RayTaskError that carries it back (batch 18, corpus 1202: verl's
update_actor raising ZeroDivisionError on every worker).

`ray.get` re-raises a remote task's exception as `ray.exceptions.RayTaskError(X)` and prints the task's own frames
right below that line, ending in X itself. The traceback is read to X; Ray's own worker.py frames (ray.get waiting)
are no DataLoader worker. A real local Ray run on the CPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

ray = pytest.importorskip("ray")

SCRIPT = """
import ray
ray.init(num_cpus=1, include_dashboard=False)

@ray.remote
def update(batch_size, workers):
    micro = batch_size // workers  # 2 // 6: the per-worker micro batch rounds down to 0
    return 12 % micro

print("step 1 rollout done", flush=True)
ray.get(update.remote(2, 6))
"""


def test_a_remote_tasks_exception_is_read_through_the_ray_task_error_that_carries_it(tmp_path: Path):
    (tmp_path / "train.py").write_text(SCRIPT)
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        # its own HOME: ray.init() writes ~/.ray/auth_token, which a later `ray start --head` would then require
        # of every client (tests/grid/test_ray.py's triage-runs was refused 'InvalidAuthToken')
        env = {**os.environ, "HOME": str(tmp_path), "RAY_USAGE_STATS_ENABLED": "0"}
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=180,
                       check=False, env=env)
    text = log.read_text(errors="replace")
    assert "RayTaskError(ZeroDivisionError)" in text and text.rstrip().endswith("integer modulo by zero"), text[-2000:]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"
    assert "ZeroDivisionError" in d.evidence[0].text


def _corpus(prefix: str):
    root = Path(__file__).resolve().parents[1] / "corpus"
    return diagnose(DiagnoseRequest(target=str(next(root.glob(f"{prefix}-*")) / "train.log")))


def test_every_verl_worker_raising_zero_division_reads_as_the_configuration_it_is():
    # corpus 1202 (a committed verl/MEM1 log): RayTaskError(ZeroDivisionError) from update_actor on six workers
    d = _corpus("1202")
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"


def test_a_native_abort_whose_what_line_two_interleaved_processes_pushed_down_carries_its_cuda_error():
    # corpus 1205 (an owner's FSDP bug notes): two processes' 'terminate called after throwing ...' run together on
    # one line, the first one's closing quote on the next, then '  what():  CUDA error: an illegal memory access'
    d = _corpus("1205")
    assert d.primary_cause is not None and d.primary_cause.value == "cuda-runtime"
