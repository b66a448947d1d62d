"""A log a run was launched into again (`python train.py >> train.log`): the new launch's counters start over (epoch 1,
step 0) and so does its loss. Batch 19's healthy 482 (a 3D VAE at epoch 3 step 17730, loss 0.08, then 'Epoch 1, Step 0'
at 1.5) was read as a loss that rose; a rise is read within the last run the counters show. Real torch runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

SCRIPT = """
import sys
import torch
torch.manual_seed(int(sys.argv[1]))
epochs, lr = int(sys.argv[2]), float(sys.argv[3])
x = torch.randn(512, 16); w = torch.randn(16, 1); y = x @ w
model = torch.nn.Linear(16, 1); opt = torch.optim.SGD(model.parameters(), lr=lr)
step = 0
for epoch in range(1, epochs + 1):
    for i in range(0, 512, 32):
        loss = torch.nn.functional.mse_loss(model(x[i:i + 32]), y[i:i + 32])
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 4 == 0:
            print(f"Epoch {epoch}, Step {step}: Loss={loss.item()}", flush=True)
        step += 1
"""


def _launch(log: Path, *args: str) -> None:
    with log.open("ab") as out:  # appended, as `>> train.log` does
        subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), *args], stdout=out, stderr=subprocess.STDOUT,
                       timeout=300, check=True)


def test_a_second_launch_appended_to_the_log_is_no_rise_of_the_first(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    _launch(log, "0", "6", "0.05")  # a run that trains to a low loss
    _launch(log, "1", "1", "0.05")  # launched again: epoch 1, step 0, its loss from the start
    lines = log.read_text().splitlines()
    assert lines[0].startswith("Epoch 1, Step 0:") and sum(x.startswith("Epoch 1, Step 0:") for x in lines) == 2
    first_end = float(lines[23].split("Loss=")[1])
    second_start = float(lines[24].split("Loss=")[1])
    assert second_start > 3 * first_end  # the shape 482 has: a low loss, then a new start far above it
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.evidence
    assert "loss-blowup" not in [a.kind.value for a in d.anomalies]


def test_a_rise_within_one_run_is_still_a_divergence(tmp_path: Path) -> None:
    """The same model trained with a learning rate past its stability limit in its second half: no reset, a real rise."""
    log = tmp_path / "train.log"
    script = SCRIPT.replace("opt.zero_grad(); loss.backward(); opt.step()",
                            "opt.zero_grad(); loss.backward(); opt.step()\n"
                            "        if epoch == 4 and i == 0:\n"
                            "            for g in opt.param_groups: g['lr'] = 1.2")
    with log.open("wb") as out:
        subprocess.run([sys.executable, "-c", textwrap.dedent(script), "0", "6", "0.05"], stdout=out,
                       stderr=subprocess.STDOUT, timeout=300, check=True)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", log.read_text()
