"""A learning rate of exactly 0, log after log (issue 13, seventeenth batch: corpus 1181, LLaMA-Factory's
'learning_rate': 0.0 at steps 6-9 of 390): the optimizer does not move the weights. Real CPU runs, logging the way the
Hugging Face Trainer does; a warm-up from 0 and a decay to 0 at the last step are the healthy shapes beside it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

RUN = """
    import torch
    torch.manual_seed(0)
    x = torch.randn(256, 8); y = x.sum(1, keepdim=True)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    steps = 40
    sched = torch.optim.lr_scheduler.LambdaLR(opt, SCHEDULE)
    for step in range(1, steps + 1):
        xb, yb = x[(step % 8) * 32 : (step % 8 + 1) * 32], y[(step % 8) * 32 : (step % 8 + 1) * 32]
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad(); loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9).item()
        opt.step()
        if step % 4 == 0:
            print({'loss': round(loss.item(), 4), 'grad_norm': round(gn, 4), 'learning_rate': opt.param_groups[0]['lr'],
                   'epoch': round(step / steps, 2)}, flush=True)
        sched.step()
"""


def _run(tmp_path: Path, schedule: str) -> Path:
    (tmp_path / "train.py").write_text(textwrap.dedent(RUN).replace("SCHEDULE", schedule))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=True)
    return log


def test_a_learning_rate_scaled_to_zero_is_a_configuration_that_trains_nothing(tmp_path):
    log = _run(tmp_path, "lambda s: 0.0")  # a scale factor that came out as 0 (a batch size that divides it away)
    assert "'learning_rate': 0.0" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.root_cause
    assert "learning-rate-zero" in [a.kind.value for a in d.anomalies]
    assert d.run_status.value == "degraded"


@pytest.mark.parametrize("schedule", ["lambda s: min(1.0, s / 8)", "lambda s: max(0.0, 1 - (s + 1) / 40)"])
def test_a_warm_up_from_zero_or_a_decay_to_zero_at_the_end_is_healthy(tmp_path, schedule):
    log = _run(tmp_path, schedule)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert "learning-rate-zero" not in [a.kind.value for a in d.anomalies], d.root_cause
    assert d.primary_cause is None


def test_a_step_decay_that_reached_zero_long_before_the_first_log_is_still_zero(tmp_path):
    """Batch 19's 1260 (OpenNMT-py at lr: 0.00000 from step 380,000 of 1,000,000, each step log followed by its
    validation lines): a run that logs every 1,000 steps, its rate halved every 50 steps (a decay meant for a run 1,000
    times shorter), so its first log already prints 0. Evaluation lines after the last step do not hide it."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import torch
        torch.manual_seed(0)
        x = torch.randn(256, 8); y = x.sum(1, keepdim=True)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.Adam(model.parameters(), lr=0.001)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5)
        for step in range(1, 3001):
            xb, yb = x[(step % 8) * 32 : (step % 8 + 1) * 32], y[(step % 8) * 32 : (step % 8 + 1) * 32]
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad(); loss.backward(); opt.step(); sched.step()
            if step % 1000 == 0:
                print(f"Step {step}/100000; xent: {loss.item():.2f}; lr: {opt.param_groups[0]['lr']:.5f}", flush=True)
                with torch.no_grad():
                    print(f"Validation perplexity: {torch.exp(torch.nn.functional.mse_loss(model(x), y)).item():.3f}", flush=True)
    """))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, str(script)], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=300, check=True)
    text = log.read_text()
    assert text.count("lr: 0.00000") == 3 and text.splitlines()[-1].startswith("Validation perplexity"), text
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error", d.root_cause
    assert "learning-rate-zero" in [a.kind.value for a in d.anomalies]
