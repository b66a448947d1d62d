"""An out-of-memory with another process holding the GPU: free the device before shrinking the run.

User trial 16's assistant with the tool overruled its first fix on a committed log (corpus 2211,
fadedfakers/W_BEVnewdataset): PyTorch's message said 'Process 2835 has 25.40 GiB memory in use' beside 'this process has
21.34 GiB' on a 47 GiB GPU, and the tool's plan began with halving the batch. Two more verbatim public reports read the
same way (1153, 926: their labels say the GPU was shared). Control: a message whose only process is the run itself
under a host PID (1000, a container) names no other holder.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.plan.shared_gpu import others_holding

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _plan(number: str) -> list[str]:
    d = diagnose(DiagnoseRequest(target=str(next(CORPUS.glob(f"{number}-*")) / "train.log")))
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.primary_cause
    shared = [f for f in d.fixes if f.fix_id == "free-shared-gpu"]
    assert all(f.command and f.command.startswith("nvidia-smi --query-compute-apps") for f in shared), shared
    return [f.fix_id for f in d.fixes]


@pytest.mark.parametrize("number", ["2211", "1153", "926"])
def test_another_process_holding_the_gpu_comes_first(number):
    plan = _plan(number)
    assert plan[0] == "free-shared-gpu", plan
    assert "reduce-batch-grad-accum" in plan, plan  # shrinking stays, after


@pytest.mark.parametrize("number", ["1000", "1706"])
def test_the_run_alone_on_its_gpu_gets_no_such_step(number):
    assert "free-shared-gpu" not in _plan(number)


def test_a_process_list_that_counts_the_run_twice_is_not_another_holder():
    """Inside a container NVML's PID for the run itself differs: its line and 'this process' together exceed what the
    device has in use, so the listed process is the run."""
    text = ("GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free. Process 4242 has 78.07 GiB memory in use. "
            "Including non-PyTorch memory, this process has 78.07 GiB memory in use.")
    assert others_holding(text) is None
    shared = text.replace("Process 4242 has 78.07", "Process 4242 has 40.00").replace("this process has 78.07", "this process has 38.07")
    assert others_holding(shared) == (40.0, 79.15, ["4242"])
