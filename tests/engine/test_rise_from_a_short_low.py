"""A loss that rises and stays up in a log that starts only a few logs before the rise (issue 13, item 2).

Corpus 1094 (a public report's paste from epoch 290 of 500): the loss at 0.016-0.3 for seven epochs, a jump to 4.3
and 24.8, then 0.93 with training accuracy 30% (from 97%) for the last 200 epochs. Its lowest log is the paste's
first, and with seven logs before the rise no window of the log is low, so the windowed test alone never saw it
rise. A real PyTorch run on CPU whose learning rate is raised 40-fold at epoch 41, logged from epoch 34 as a resumed
job would, must stay a divergence (it was one before too).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]

RUN = textwrap.dedent("""
    import torch
    torch.manual_seed(0)
    x = torch.randn(600, 10); y = (x @ torch.randn(10, 3)).argmax(1)
    model = torch.nn.Sequential(torch.nn.Linear(10, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(1, 201):
        if epoch == 41:
            opt.param_groups[0]["lr"] = 20.0
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        acc = (model(x).argmax(1) == y).float().mean().item()
        if epoch >= 34:
            print(f"E{epoch}/200 | Loss:{loss.item():.4f} | TrA:{100 * acc:.2f}%", flush=True)
""")


def test_a_rise_soon_after_the_paste_starts():
    log = next((TESTS / "corpus").glob("1094-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence"
    assert d.run_status.value == "diverged"


def test_a_real_rise_logged_from_mid_run(tmp_path):
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, "-c", RUN], capture_output=True, text=True, timeout=120, check=True)
    log = tmp_path / "train.log"
    log.write_text(out.stdout)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence"
