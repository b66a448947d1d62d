"""A NaN right after the learning rate jumped names the jump (fifth user trial, case 06: a StepLR with gamma 10
instead of 0.1 took the lr from 0.3 to 3.0 at step 14000; the report said 'no warning rise in gradient norm: a
corrupt late batch'). A real run: the same schedule on a small regression goes NaN a few steps after the jump,
and the finding cites the lr's rise with both steps; the same run with gamma 0.1 finishes finite."""

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
    x = torch.randn(4096, 16) * 3; y = x @ torch.randn(16, 1)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=300, gamma=float(sys.argv[1]))
    for step in range(1, 401):
        i = (step * 64) % 4096
        loss = torch.nn.functional.mse_loss(model(x[i:i + 64]), y[i:i + 64])
        opt.zero_grad(); loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))  # the norm only: no clipping
        opt.step(); sched.step()
        print(f"step {step}/400 | loss {loss.item():.4f} | lr {opt.param_groups[0]['lr']:.3e} | grad_norm {gn.item():.4f}",
              flush=True)
""")


def _run(tmp_path: Path, gamma: str) -> Path:
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", _RUN, gamma], capture_output=True, text=True, timeout=300, check=True)
    log = tmp_path / f"train-{gamma}.log"
    log.write_text(r.stdout)
    return log


def test_a_nan_after_the_lr_jumped_names_the_jump(tmp_path):
    log = _run(tmp_path, "100")
    assert "nan" in log.read_text().lower()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", d.root_cause
    onset = next(a for a in d.anomalies if a.kind.value == "nan-onset")
    assert "learning rate rising" in onset.detail and "step 300" in onset.detail, onset.detail


def test_the_same_run_decaying_stays_finite(tmp_path):
    log = _run(tmp_path, "0.1")
    assert "nan" not in log.read_text().lower()
    assert diagnose(DiagnoseRequest(target=str(log))).primary_cause is None
