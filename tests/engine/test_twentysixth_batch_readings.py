"""A training script's own NaN guard that raises 'Gradient exploded!' names a non-finite loss, not a config error
(catalog nan-inf loss-is-nan-message; batch 26's 1421, YOLOv3-TensorFlow raising ArithmeticError when its loss is
NaN). A training loss of exactly 0 at every log sums over nothing (analyse/frozen.loss_zero; batch 27's 603,
detectron2's 'total_loss: 0' at every iteration, and healthy 034, 131, 510), unless a gradient norm says gradients
flow. Real loops, and the verbatim public log."""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.engine.batchcase import run_script

TESTS = Path(__file__).resolve().parents[1]

_GUARD = """
    import math, torch
    torch.manual_seed(0)
    w = torch.tensor([2.0], requires_grad=True)
    opt = torch.optim.SGD([w], lr=3.0)
    for step in range(1, 50):
        loss = torch.log(w).pow(2).sum() + (w - 1).pow(2).sum()  # log of a weight the step drives below 0
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"Epoch: 1, global_step: {step} | loss: total: {loss.item():.2f}, xy: {w.item():.2f}", flush=True)
        if math.isnan(loss.item()):
            raise ArithmeticError("Gradient exploded! Please train again and you may need modify some parameters.")
"""


def _primary(log: Path) -> str | None:
    d = diagnose(DiagnoseRequest(target=str(log)))
    return d.primary_cause.value if d.primary_cause else None


def test_a_loops_own_nan_guard_raising_gradient_exploded_is_nan_inf(tmp_path: Path):
    log = run_script(tmp_path, _GUARD)
    assert "ArithmeticError: Gradient exploded!" in log.read_text()
    assert _primary(log) == "nan-inf"


def test_yolov3_tensorflow_gradient_exploded_paste():
    """Verbatim issue-thread log (tests/corpus/1421-*/case.json cites it)."""
    assert _primary(next((TESTS / "corpus").glob("1421-*")) / "train.log") == "nan-inf"


# a segmentation loop whose masks are all the ignore index: its summed loss is exactly 0 at every iteration; and a
# GRPO-style surrogate whose value is 0 at a policy ratio of 1 while its gradient is not (the control)
_ZERO = """
    import sys, torch
    torch.manual_seed(0)
    model = torch.nn.Conv2d(3, 4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for it in range(1, 13):
        x = torch.randn(2, 3, 8, 8)
        if sys.argv[1] == "ignored":
            target = torch.full((2, 8, 8), 255)  # every pixel the ignore index: the masks did not load
            out = model(x)
            valid = (target != 255).sum()
            loss = torch.nn.functional.cross_entropy(out, target, ignore_index=255, reduction="sum") / valid.clamp(min=1)
        else:
            logp = torch.log_softmax(model(x).mean((2, 3)), 1)[:, 0]
            adv = torch.tensor([1.0, -1.0])  # a group's advantages, normalised to mean 0
            loss = -((logp - logp.detach()).exp() * adv).mean()  # 0 in value at ratio 1, not in gradient
        opt.zero_grad(); loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        opt.step()
        print(f"iter: {it * 20}  total_loss: {loss.item() + 0.0:.4g}  grad_norm: {norm.item():.4g}  lr: 0.01", flush=True)
"""


@pytest.mark.parametrize(("how", "expected"), [("ignored", ("data-pipeline", "degraded")), ("surrogate", (None, "running"))])
def test_a_loss_of_exactly_zero_at_every_log_learns_nothing_unless_gradients_flow(tmp_path: Path, how: str, expected):
    log = run_script(tmp_path, _ZERO, how, check=True)
    assert "total_loss: 0 " in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert ((d.primary_cause.value if d.primary_cause else None), d.run_status.value) == expected
