"""A crash in evaluation code is a configuration error, not an evaluation mismatch; a MemoryError anywhere is OOM.

catalog/exceptions.toml mapped any exception raised under an evaluate() or metrics call to evaluation-mismatch (a
disagreement between metrics, which is read from the metrics), whatever it said. Seen on
prospective logs nobody had tuned for: corpus 666 (LLaMA-Factory's 'TypeError: iteration over a 0-d tensor' in
compute_loss during evaluation) and 670 (rl4co's 51200 vs 512 shape mismatch in Lightning's sanity check), both
configuration errors the engine called evaluation-mismatch, as 450 (a NameError under a metrics module) was.
The logs here come from really running the failures (real PyTorch on the CPU, real MemoryError).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

EVAL_CRASH = r'''
import torch
from torch import nn

def compute_metrics(losses):
    return sum(x for x in torch.stack(losses).mean())  # a 0-d tensor: iterating it raises TypeError

def evaluate(model, batches):
    model.eval()
    with torch.no_grad():
        return compute_metrics([nn.functional.mse_loss(model(x), y) for x, y in batches])

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
for step in range(1, 21):
    x, y = batches[step % 4]
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"step {step} | loss {loss.item():.4f}", flush=True)
    if step % 10 == 0:
        print(f"eval at step {step}: {evaluate(model, batches)}", flush=True)
'''

LOADER_MEMORY_ERROR = r'''
class ImageDataset:
    """Decodes every image up front on first access, as an eager loader does."""
    def __init__(self, n):
        self.n = n
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        return bytearray(1 << 62)  # more than any machine has: CPython raises MemoryError

def batches(dataset, size):
    for start in range(0, len(dataset), size):
        yield [dataset[i] for i in range(start, start + size)]

print("epoch 1: loading 1000 images", flush=True)
for b in batches(ImageDataset(1000), 8):
    pass
'''


def _run(tmp_path: Path, script: str) -> Path:
    log = tmp_path / "train.log"
    with log.open("w") as out:
        p = subprocess.run([sys.executable, "-c", script], stdout=out, stderr=subprocess.STDOUT, timeout=300, check=False)
    assert p.returncode == 1, log.read_text()[-2000:]
    return log


@pytest.mark.slow
def test_a_type_error_raised_in_evaluation_is_a_config_error(tmp_path: Path) -> None:
    log = _run(tmp_path, EVAL_CRASH)
    assert "TypeError: iteration over a 0-d tensor" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.root_cause
    assert "iteration over a 0-d tensor" in d.root_cause.proximate
    assert "fix-eval-config" in [f.fix_id for f in d.fixes]


def test_a_memory_error_raised_in_a_dataset_is_oom(tmp_path: Path) -> None:
    log = _run(tmp_path, LOADER_MEMORY_ERROR)
    assert "MemoryError" in log.read_text() and "__getitem__" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "oom", d.root_cause
