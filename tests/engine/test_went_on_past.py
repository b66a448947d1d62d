"""An event the run went on past is never the terminal event; a warning is not a crash (issue 13, behaviour 5).

Real logs: healthy 020 (TensorFlow's INFO-level 'failed to allocate ... CUDA_ERROR_OUT_OF_MEMORY' lines in
epoch 15 of 100, then 85 more Keras epochs whose lines carry a loss but no step counter, and 'Process finished
with exit code 0'), healthy 027 (tensorboardX's WARNING 'NaN or Inf found in input tensor' above eight
training lines). A real run: a PyTorch loop that logs a NaN warning, then trains on, printing per-epoch
losses without a step counter.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

HEALTHY = Path(__file__).resolve().parents[1] / "healthy"


def _case(prefix: str) -> Path:
    return next(HEALTHY.glob(f"{prefix}-*")) / "train.log"


def test_info_level_allocation_failures_85_epochs_before_the_end_name_nothing_healthy_020():
    d = diagnose(DiagnoseRequest(target=str(_case("020"))))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value == "completed"


def test_a_warning_the_run_trained_past_is_neither_a_crash_nor_a_recovery_healthy_027():
    d = diagnose(DiagnoseRequest(target=str(_case("027"))))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value in ("running", "unknown")


WARN_THEN_TRAIN = """
    import logging
    import torch
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:%(name)s:%(message)s")
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(64, 4); y = x.sum(1, keepdim=True)
    for epoch in range(6):
        if epoch == 1:
            logging.getLogger("writer").warning("NaN or Inf found in input tensor.")
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"8/8 - 0s - loss: {loss.item():.4f}", flush=True)
"""


def test_a_real_run_that_trained_on_past_a_nan_warning_is_not_crashed(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(WARN_THEN_TRAIN))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=True)
    assert "WARNING:writer:NaN or Inf" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value not in ("crashed", "recovered"), d.run_status


# Healthy 231 (thirteenth batch, scored before this): a DDP run whose rank 0 logs a weights-only load failure of an
# optional helper, one gradient-norm spike (11x its median at epoch 7, clipped) and then 64 more epochs with the loss
# falling. A real run of the same shape: torch.load(weights_only=True) refusing a file that holds a numpy scalar (the
# real message), caught and logged, and one batch scaled 40x at step 30, then 90 clean steps with clipping.
SPIKE_AND_CAUGHT_ERROR = """
    import numpy, torch
    torch.manual_seed(0)
    torch.save({"scale": numpy.float64(1.0)}, "helper.pt")
    try:
        torch.load("helper.pt", weights_only=True)
    except Exception as e:
        print(f"Failed to initialize helper runner: {e}".splitlines()[0])
    x = torch.randn(2048, 16); w = torch.randn(16, 1); y = x @ w + 0.1 * torch.randn(2048, 1)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    for step in range(120):
        xb, yb = x[step * 16 % 2048:][:16], y[step * 16 % 2048:][:16]
        if step == 30:
            xb, yb = xb * 40, yb * 40
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad(); loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        print(f"[{step:3d}/5000]  loss: {loss.item():.4f},  grad_norm: {norm.item():.4f}")
"""


def test_a_clipped_spike_and_a_caught_error_the_run_trained_far_past_name_nothing(tmp_path):
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(SPIKE_AND_CAUGHT_ERROR)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    assert "Weights only load failed" in out and "[119/5000]" in out
    log = tmp_path / "train.log"
    log.write_text(out)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, (d.primary_cause, d.root_cause)
    healthy = diagnose(DiagnoseRequest(target=str(_case("231"))))
    assert healthy.primary_cause is None, (healthy.primary_cause, healthy.root_cause)
