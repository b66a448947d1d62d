"""Completion read from the run's shape: a whole-run summary after the last step (issue 13, behaviour 2).

Real logs: healthy 005 (fairseq 'num_updates: 25 >= max_update: 25' before the last checkpoint save), 008
(detectron2 'Overall training speed ... Total training time' after iter 299), 010 (YOLOv5 'N epochs completed in'
then the best model's validation table), 013 (a DeepSpeed run's last save, then the shell prompt it returned to), 019 (a
script's 'Process completed successfully.' after its last step, about the process as a whole).
Real runs: a PyTorch loop that prints its total training time and exits; the same with an exception after the
summary, which is not a completion.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

HEALTHY = Path(__file__).resolve().parents[1] / "healthy"


@pytest.mark.parametrize("case", ["005", "008", "010", "013", "019", "042", "052"])
def test_a_whole_run_summary_after_the_last_step_is_completion(case):
    d = diagnose(DiagnoseRequest(target=str(next(HEALTHY.glob(f"{case}-*")) / "train.log")))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value == "completed"


TRAIN = """
    import sys, time
    import torch
    t0 = time.time()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 4); y = x.sum(1, keepdim=True)
    for it in range(20):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"iter: {it}  total_loss: {loss.item():.4f}", flush=True)
    print(f"Total training time: {time.time() - t0:.2f}s", flush=True)
    if len(sys.argv) > 1:
        raise RuntimeError("writing the report failed")
"""


def _run(tmp_path: Path, *args: str) -> Path:
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py", *args], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False)
    return log


def test_a_real_run_printing_its_total_training_time_completed(tmp_path):
    d = diagnose(DiagnoseRequest(target=str(_run(tmp_path))))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value == "completed"


def test_a_real_run_failing_after_its_summary_is_not_completed(tmp_path):
    d = diagnose(DiagnoseRequest(target=str(_run(tmp_path, "fail"))))
    assert d.run_status.value == "crashed"


def test_a_keras_header_for_the_last_epoch_with_no_bar_below_is_still_running_healthy_062():
    """Keras prints 'Epoch 16/16' as the epoch starts: a log that ends on it is mid-epoch, not finished."""
    d = diagnose(DiagnoseRequest(target=str(next(HEALTHY.glob("062-*")) / "train.log")))
    assert d.run_status.value != "completed"


def test_keras_last_epoch_bar_at_its_end_then_evaluate_is_completed_healthy_063():
    """'Epoch 100/100' and its bar at 4451/4451, then model.evaluate()'s own bar: training finished."""
    d = diagnose(DiagnoseRequest(target=str(next(HEALTHY.glob("063-*")) / "train.log")))
    assert d.run_status.value == "completed"
