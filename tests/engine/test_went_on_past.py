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
