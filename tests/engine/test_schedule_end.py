"""A learning rate that decays to its floor on the run's last training log is the schedule's end, so the run reached
its configured last step (engine/analyse/schedule.py; batch 26's 578, GluonCV's cosine to lr=0.000000 at epoch 359 of
360, and 595, an HF Trainer's linear decay to 3.3e-07). Real torch runs with their schedulers: a cosine run to its end
is completed; the same run stopped at 60%, and a step schedule holding at its last milestone, are not read so (37
epochs: not a round total, which the 0-based epoch reading of analyse/completion.py would take as the end)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.engine.batchcase import run_script

_TRAIN = """
    import sys, torch
    torch.manual_seed(0)
    x = torch.randn(256, 8); y = x @ torch.randn(8, 1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    epochs, which, stop = 37, sys.argv[1], int(sys.argv[2])
    sched = (torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs) if which == "cosine"
             else torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.1))
    for epoch in range(stop):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        print(f"Epoch[{epoch}] Batch [8]\\tSpeed: 4011.19 samples/sec\\tloss={loss.item():.6f}\\tlr={sched.get_last_lr()[0]:.6f}", flush=True)
        print(f"[Epoch {epoch}] validation: val_loss={loss.item() * 1.1:.6f}", flush=True)
"""


def _status(tmp_path: Path, which: str, stop: int) -> str:
    log = run_script(tmp_path, _TRAIN, which, str(stop), check=True)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None
    return d.run_status.value


def test_a_cosine_schedule_that_reached_zero_on_the_last_log_is_a_completed_run(tmp_path: Path):
    assert _status(tmp_path, "cosine", 37) == "completed"


@pytest.mark.parametrize(("which", "stop"), [("cosine", 22), ("step", 37)], ids=["cosine-stopped-at-60pct", "step-schedule"])
def test_a_rate_still_high_or_holding_at_a_milestone_is_no_end(tmp_path: Path, which: str, stop: int):
    assert _status(tmp_path, which, stop) != "completed"
