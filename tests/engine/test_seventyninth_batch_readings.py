"""Readings issue 13's seventy-ninth to eighty-first batches showed, each on a real run.

torchrun's agent logs the SIGHUP that ends it ('Received 1 death signal, shutting down workers') at WARNING level, as
a glog line ('W1229 16:43:25.650000 190834 .../api.py:723] Received 1 death signal'). A log that ends on that line
(the SignalException traceback went to another stream, or the paste stops there: corpus 2217) was read as a warning
the run could have outlived, and no class was named.

Two more from verbatim public reports (the corpus cases cited): fairseq catches a CUDA OOM in its train step and logs
it at WARNING ('attempting to recover from OOM in forward/backward pass', fairseq#2857, corpus 2257: abstained; 1212
named oom at 0.45 from the damped warning); Thrust's own error ('thrust::system::system_error', 'parallel_for failed:
invalid configuration argument', PaddleDetection#1509, corpus 2258) is the CUDA call that failed, read as the glog
FATAL line's process crash before. And DTensor's refusal of a plain tensor mixed into a distributed one ('aten.add.Tensor
got mixed torch.Tensor and DTensor': fyh2001/megatron-sft-recipes, corpus 2268) is how the parallel plan or the model was
written, not a collective that failed, although its frames are under torch/distributed/ (read nccl-distributed before).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


def _case(number: str) -> str:
    return str(next(CORPUS.glob(f"{number}-*")) / "train.log")

# a loop as HF's Trainer shows it: a tqdm bar on stderr, a loss dict every few steps (corpus 2217's shape)
STEPS = """
    import sys, time
    import torch
    from tqdm import tqdm
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1); opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in tqdm(range(1, 2841), file=sys.stderr, mininterval=0):
        x = torch.randn(32, 8); loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 5 == 0:
            tqdm.write(str({"loss": round(loss.item(), 4), "learning_rate": 0.05, "epoch": round(step / 100, 2)}), file=sys.stdout)
            sys.stdout.flush()
        time.sleep(0.05)
"""


def _hung_up_run(tmp_path: Path) -> str:
    """A real torchrun launch of a CPU training loop, sent SIGHUP (a closed terminal) once it has trained 20 steps."""
    (tmp_path / "train.py").write_text(textwrap.dedent(STEPS))
    log = tmp_path / "whole.log"
    with open(log, "wb") as out:
        agent = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "train.py"],
                                 cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "'epoch': 0.2}" not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline and agent.poll() is None, log.read_text(errors="replace")
            time.sleep(0.2)
        os.kill(agent.pid, signal.SIGHUP)
        agent.wait(timeout=60)
    finally:
        if agent.poll() is None:
            os.killpg(agent.pid, signal.SIGKILL)
    return log.read_text(errors="replace")


@pytest.mark.slow
def test_a_log_that_ends_on_torchruns_death_signal_warning_is_a_process_crash(tmp_path):
    text = _hung_up_run(tmp_path)
    lines = text.splitlines(keepends=True)
    at = next((i for i, line in enumerate(lines) if "Received 1 death signal" in line), None)
    assert at is not None, text[-2000:]
    assert "W" in lines[at].split("Received")[0] or "WARNING" in lines[at], lines[at]  # logged at warning level
    assert "it/s]" in lines[at] or "s/it]" in lines[at], lines[at]  # glued after the bar, which wrote no newline
    cut = tmp_path / "train.log"
    cut.write_text("".join(lines[: at + 1]))  # the run's own lines up to and with the agent's report, as corpus 2217 ends
    d = diagnose(DiagnoseRequest(target=str(cut)))
    assert d.primary_cause is not None and d.primary_cause.value == "process-crash", (d.primary_cause, lines[at])
    assert d.run_status.value == "crashed"
    assert "detach-from-terminal" in [f.fix_id for f in d.fixes[:3]], [f.fix_id for f in d.fixes]


@pytest.mark.slow
def test_the_training_lines_before_the_signal_name_nothing(tmp_path):
    """Control: the same run cut before the agent's report is ordinary progress: no class."""
    text = _hung_up_run(tmp_path)
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "Received 1 death signal" in line)
    cut = tmp_path / "train.log"
    cut.write_text("".join(lines[:at]))
    d = diagnose(DiagnoseRequest(target=str(cut)))
    assert d.primary_cause is None, (d.primary_cause, lines[at - 3 : at])


def test_fairseqs_caught_oom_warning_before_the_spawn_traceback_is_the_oom():
    d = diagnose(DiagnoseRequest(target=_case("2257")))  # fairseq#2857, verbatim
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.primary_cause
    assert "reduce-batch-grad-accum" in [f.fix_id for f in d.fixes[:3]], [f.fix_id for f in d.fixes]


def test_thrusts_cuda_error_under_a_native_abort_is_the_cuda_runtime():
    d = diagnose(DiagnoseRequest(target=_case("2258")))  # PaddlePaddle/PaddleDetection#1509, verbatim
    assert d.primary_cause is not None and d.primary_cause.value == "cuda-runtime", d.primary_cause
    assert "cuda-launch-blocking" in [f.fix_id for f in d.fixes[:2]], [f.fix_id for f in d.fixes]


DTENSOR = """
    import os, sys
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ["MASTER_PORT"] = sys.argv[1]
    import torch, torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    dist.init_process_group("gloo", rank=0, world_size=1)
    w = distribute_tensor(torch.randn(8, 4), init_device_mesh("cpu", (1,)), [Shard(0)])
    for step in range(1, 6):
        print(f"step {step} loss {(w.full_tensor() ** 2).mean().item():.4f}", flush=True)
    y = w + torch.ones(8, 4)  # a plain tensor mixed into a DTensor op
"""


@pytest.mark.slow
def test_dtensor_refusing_a_plain_tensor_is_read_as_the_parallel_plans_error(tmp_path):
    """A real single-rank DTensor run on gloo: DTensor's own words name the rule, not the catch-all."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free_port = s.getsockname()[1]
    (tmp_path / "dt.py").write_text(textwrap.dedent(DTENSOR))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "dt.py", str(free_port)], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
    text = log.read_text(errors="replace")
    assert "got mixed torch.Tensor and DTensor" in text, text[-1500:]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.primary_cause
    assert "traceback:dtensor-misuse" in d.model_dump_json(), d.model_dump_json()[:2000]


def test_dtensor_misuse_under_torch_distributed_frames_is_no_collective_failure():
    d = diagnose(DiagnoseRequest(target=_case("2268")))  # fyh2001/megatron-sft-recipes run_20260424_191959, verbatim
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.primary_cause


def test_an_attribute_error_while_fsdp2_wraps_the_model_is_configuration():
    """accelerate's FSDP2 preparation loading a full state dict met a plain tensor ('Tensor' object has no attribute
    'device_mesh'; fyh2001/megatron-sft-recipes run_20260424_184804, corpus 2291, read data-pipeline from the data
    loaders its callers hand through): the wrapper's own frames name the cause."""
    d = diagnose(DiagnoseRequest(target=_case("2291")))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.primary_cause
