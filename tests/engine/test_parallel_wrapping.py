"""FSDP refusing the model it is asked to wrap is a configuration error, not a communication failure, although
every frame of its traceback is under torch/distributed/.

A real FSDP wrap (gloo, one process, on the CPU) of a model whose layers hold bfloat16 and float16 parameters: FSDP
raises 'Must flatten tensors with uniform dtype' while building its flat parameter, before any collective runs
(LLaMA-Factory's QLoRA + FSDP report, corpus 779, reads the same).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")

WRAP = """
    import os, sys, torch, torch.distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", sys.argv[1]
    dist.init_process_group("gloo", rank=0, world_size=1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8).to(torch.bfloat16), torch.nn.Linear(8, 8).to(torch.float16))
    model = FSDP(model, device_id=torch.device("cpu"))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fsdp_refusing_mixed_dtypes_is_a_config_error(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(WRAP))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py", str(_free_port())], cwd=tmp_path, stdout=out,
                       stderr=subprocess.STDOUT, timeout=180, check=False)
    text = log.read_text()
    assert "Must flatten tensors with uniform dtype" in text and "fsdp/_flat_param.py" in text, text[-2000:]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", (d.primary_cause, text[-2000:])
