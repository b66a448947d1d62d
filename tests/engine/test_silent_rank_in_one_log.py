"""Ranks that share one log (torchrun --tee) where one rank only timed out waiting and the other went silent (the
twelfth user trial's case01: rank 0 deadlocked in its checkpoint code, rank 1's gloo recv timed out after 60 s; the
report asked for 'the other ranks' logs' it already had). Real torchrun runs of two gloo ranks on the CPU: rank 0
re-enters a lock it holds after step 25 while rank 1 waits in step 26's all_reduce.

- The silent rank is named as the one the others waited for, with its last step, and the evidence asked for is its
  stack, not logs the report already holds.
- When the deadlocked rank survives the launcher's SIGTERM (a SIGTERM handler of its own: here faulthandler's dump),
  torchrun SIGKILLs it 30 s later ('Unable to shutdown process N via 15, forcefully exiting via 9'): its 'exitcode:
  -9 (SIGKILL)' is that teardown, not out of memory (it read as oom at 0.95)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

_RUN = """
import datetime, faulthandler, signal, sys, threading, torch, torch.distributed as dist
if sys.argv[1] == "dump":
    faulthandler.register(signal.SIGTERM, all_threads=True)  # dumps the stacks and does not exit
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=8))
r = dist.get_rank()
lock = threading.Lock()

def snapshot():
    with lock:
        with lock:  # re-entered: a deadlock in the checkpoint code
            pass

for step in range(1, 41):
    g = torch.ones(4) * step
    dist.all_reduce(g)
    print(f"[rank{r}] step {step}/40 | loss {1.0 / step:.4f}", flush=True)
    if r == 0 and step == 25:
        snapshot()
"""


def _torchrun(tmp_path: Path, mode: str) -> Path:
    pytest.importorskip("torch")
    if shutil.which("torchrun") is None:
        pytest.skip("torchrun is not installed")
    script = tmp_path / "train.py"
    script.write_text(_RUN)
    log = tmp_path / f"train-{mode}.log"
    with log.open("w") as f:
        subprocess.run(["torchrun", "--nproc_per_node", "2", "--tee", "3", str(script), mode], stdout=f,
                       stderr=subprocess.STDOUT, timeout=300, check=False, cwd=tmp_path)
    return log


def test_the_rank_that_went_silent_is_named_and_its_stack_is_what_is_missing(tmp_path: Path) -> None:
    log = _torchrun(tmp_path, "plain")
    text = log.read_text()
    assert "Timed out waiting" in text and "[rank0] step 25/40" in text and "[rank0] step 26/40" not in text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert "The first rank to fail was train-plain.log [rank0]" in d.root_cause.root, d.root_cause.root
    need = d.insufficient_evidence or ""
    assert "[rank0] stopped after step 25" in need and "other ranks' logs" not in need, need


def test_a_rank_the_launcher_had_to_sigkill_is_not_out_of_memory(tmp_path: Path) -> None:
    log = _torchrun(tmp_path, "dump")
    text = log.read_text()
    assert "forcefully exiting via 9" in text and "(SIGKILL)" in text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None or d.primary_cause.value != "oom", d.root_cause
