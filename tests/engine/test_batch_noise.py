"""Per-batch noise is not divergence (issue 13, behaviour 6): a blow-up needs its level to rise and stay.

Real log: healthy 021 (a Keras PSPNet on batches of two: the printed loss swings 0.22-3.72 step to step while
the run trains). Real run: PyTorch on batches of two samples of a noisy regression, printing every batch's loss.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

HEALTHY = Path(__file__).resolve().parents[1] / "healthy"


def test_a_batch_of_two_loss_swinging_is_not_divergence_healthy_021():
    d = diagnose(DiagnoseRequest(target=str(next(HEALTHY.glob("021-*")) / "train.log")))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value in ("running", "unknown")


NOISY = """
    import torch
    torch.manual_seed(3)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    X = torch.randn(400, 8); Y = X.sum(1, keepdim=True) + 1.5 * torch.randn(400, 1)
    for step in range(200):
        i = torch.randint(0, 400, (2,))
        loss = torch.nn.functional.mse_loss(model(X[i]), Y[i])
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
"""


def test_a_real_noisy_batch_of_two_run_is_not_called_diverged(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(NOISY))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=True)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None or d.primary_cause.value != "optimization-divergence", d.root_cause
    assert d.run_status.value != "diverged"
