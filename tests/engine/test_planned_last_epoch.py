"""A run that counts epochs from 0 and whose whole log ends on the summary of epoch 4, 99 or 149 finished the last
epoch of a round total (5, 100, 150) its configuration asked for (issue 13, item 5: completed runs read as
running). Healthy 011 (MXNet, Epoch[4] of 5), 125 (Epoch 99 of 100) and 132 ([EPOCH 119] of 120) end this way.

Real PyTorch runs: a 10-epoch run printing 'Epoch {e} Train Loss ... Validation Loss ...' is completed, and its
evidence says which line was read as the end; the same script configured for 20 epochs and killed after epoch 6,
or killed inside epoch 9 (its batch lines 'Epoch [9][40/100]'), is not.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

_RUN = textwrap.dedent("""
    import sys, torch
    torch.manual_seed(0)
    epochs, batches = int(sys.argv[1]), 100
    x = torch.randn(2000, 8); y = x @ torch.randn(8, 1) + 0.1 * torch.randn(2000, 1)
    model = torch.nn.Linear(8, 1); opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for e in range(epochs):
        order, total = torch.randperm(1600), 0.0
        for b in range(batches):
            idx = order[b * 16:(b + 1) * 16]
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
            opt.zero_grad(); loss.backward(); opt.step()
            total += loss.item()
            if sys.argv[2] == "batches" and b % 20 == 0:
                print(f"Epoch [{e}][{b}/{batches}]  lr: 0.05  loss: {loss.item():.4f}", flush=True)
        with torch.no_grad():
            val = torch.nn.functional.mse_loss(model(x[1600:]), y[1600:]).item()
        print(f"Epoch {e} Train Loss: {total / batches:.6f}  Validation Loss: {val:.6f}", flush=True)
""")


def _run(tmp_path: Path, epochs: int, style: str, stop_after: str | None = None) -> Path:
    pytest.importorskip("torch")
    log = tmp_path / "train.log"
    proc = subprocess.Popen([sys.executable, "-c", _RUN, str(epochs), style], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    with open(log, "w") as out:
        for line in proc.stdout:
            out.write(line)
            if stop_after is not None and line.startswith(stop_after):
                proc.kill()  # the run is cut here, as a log read while it runs or killed without a word
                break
    proc.wait(timeout=300)
    return log


def test_a_whole_log_ending_on_epoch_9_of_a_0_based_count_is_completed(tmp_path):
    log = _run(tmp_path, 10, "epochs")
    assert log.read_text().splitlines()[-1].startswith("Epoch 9 ")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value == "completed", d.evidence
    assert d.primary_cause is None
    assert any("read as the run's end" in e.text and "Epoch 9 " in e.text for e in d.evidence), d.evidence


def test_a_log_cut_after_epoch_6_of_20_is_not_completed(tmp_path):
    log = _run(tmp_path, 20, "epochs", stop_after="Epoch 6 ")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value in ("running", "unknown"), d.run_status


def test_a_log_cut_inside_epoch_9_is_not_completed(tmp_path):
    log = _run(tmp_path, 20, "batches", stop_after="Epoch [9][40/100]")
    assert log.read_text().splitlines()[-1].startswith("Epoch [9][40/100]")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value in ("running", "unknown"), d.run_status


@pytest.mark.parametrize("case", ["011", "125", "132"])
def test_healthy_logs_ending_on_the_last_epoch_of_a_round_total(case):
    log = next((Path(__file__).resolve().parents[1] / "healthy").glob(f"{case}-*")) / "train.log"
    assert diagnose(DiagnoseRequest(target=str(log))).run_status.value == "completed"
