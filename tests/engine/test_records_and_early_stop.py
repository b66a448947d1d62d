"""A log that resumes and stops early, read as it reads (healthy 192, imbibekk/kaggle-siim's committed train_log.txt;
twelfth prospective batch's false alarm, scored before these changes):

- 'Best Loss: 0.577 | Best Dice: 0.849' is the best value so far, printed beside the epoch's own line: not a reading
  of the loss series.
- An aborted launch's 'Train_loss: 0.00000' (an epoch that trained no batch) as the series' first log is no low for
  the resumed run's loss to 'rise' from: the series' ends are smoothed like its middle.
- The run's own early stop ('Early Stopping....@ 72 epoch', Keras' 'Epoch 00036: early stopping', LightGBM's
  'Early stopping, best iteration is:') is its planned end.
Real PyTorch runs: one stopped by its early-stopping rule is completed; the same with the stop line cut off is not.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.read.metrics import parse_line

TESTS = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("line", ["Best Loss: 0.57703697681427 | Best Dice: 0.8494841456413269",
                                  "Min Loss: 0.31 | Prev Loss: 0.35"])
def test_best_so_far_values_are_not_readings(line):
    assert parse_line(line) is None


def test_a_current_loss_beside_a_best_one_is_still_read():
    parsed = parse_line("Epoch 3 | best loss 0.3 | loss 0.5")
    assert parsed is not None and parsed[0]["loss"] == 0.5


@pytest.mark.parametrize("case", ["192", "093"])
def test_healthy_runs_that_stopped_early_are_completed(case):
    log = next((TESTS / "healthy").glob(f"{case}-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value == "completed", d.evidence


_RUN = textwrap.dedent("""
    import torch
    torch.manual_seed(0)
    x = torch.randn(600, 8); y = x @ torch.randn(8, 1) + 0.5 * torch.randn(600, 1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    best, bad, patience = float("inf"), 0, 5
    for epoch in range(1, 301):
        for i in range(0, 400, 20):
            loss = torch.nn.functional.mse_loss(model(x[i:i + 20]), y[i:i + 20])
            opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            val = torch.nn.functional.mse_loss(model(x[400:]), y[400:]).item()
        print(f"Epoch: {epoch} | Train_loss: {loss.item():.5f} | Val loss: {val:.5f}", flush=True)
        if val < best:
            best, bad = val, 0
        else:
            bad += 1
        print(f"Best Loss: {best}", flush=True)
        if bad >= patience:
            print(f"Early Stopping....@ {epoch} epoch for patience @ {patience}", flush=True)
            break
""")


def test_a_real_run_ended_by_its_early_stopping_rule_is_completed(tmp_path):
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True, timeout=300, check=True).stdout
    lines = out.splitlines()
    assert lines[-1].startswith("Early Stopping....@") and len(lines) < 600  # it really stopped before epoch 300
    log = tmp_path / "train.log"
    log.write_text(out)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value == "completed", d.evidence
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(lines[:-1]) + "\n")  # the same log read before the stop line was written
    assert diagnose(DiagnoseRequest(target=str(cut))).run_status.value != "completed"
