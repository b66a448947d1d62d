"""A loss pinned at a value only a collapsed network prints (issue 13, item 2: a loss stuck for hundreds of iterations).

Real logs from public reports: corpus 454 (Caffe MobileNetV3 at 6.90776 = ln 1000 iteration after iteration, a
smoothed average printed between them), 460 (TF2 CIFAR-10 at 2.3038 = ln 10 with accuracy 10% for four epochs),
395 and 539 (Caffe at 87.3365 = -ln FLT_MIN), 538 (the same weighted by 20: 1746.73), 456 (WS-DAN's bar showing
Loss 6.2739 at epochs 85-90, the bar's 8144/8144 count the same in each). Real runs: a PyTorch classifier's first
iterations sit at ln 10 with accuracy near 1/10 and must not be called collapsed.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.analyse.chance import FLT_MIN_LOSS
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _case(prefix: str) -> Path:
    return next((TESTS / "corpus").glob(f"{prefix}-*")) / "train.log"


def test_flt_min_loss_is_caffes_clamp():
    assert f"{FLT_MIN_LOSS:.4f}" == "87.3365"


@pytest.mark.parametrize(("case", "says"), [
    ("454", "ln 1000 to every printed digit"),
    ("460", "ln 10 with an accuracy of 1/10"),
    ("395", "-ln(FLT_MIN)"),
    ("539", "-ln(FLT_MIN)"),
    ("538", "20 x 87.3365"),
    ("456", "6.2739 at each of the last 6 logs"),
])
def test_a_collapsed_network_is_optimization_divergence(case, says):
    d = diagnose(DiagnoseRequest(target=str(_case(case))))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", d.root_cause
    assert says in d.root_cause.proximate, d.root_cause.proximate
    assert d.run_status.value == "degraded"


_FIRST_STEPS = textwrap.dedent("""
    import sys, torch
    torch.manual_seed(int(sys.argv[1]))
    x = torch.randn(4000, 32); y = (x @ torch.randn(32, 10)).argmax(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    for m in model:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.normal_(m.weight, std=1e-3); torch.nn.init.zeros_(m.bias)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for it in range(40):
        xb, yb = x[it * 100 % 4000:][:100], y[it * 100 % 4000:][:100]
        logits = model(xb); loss = torch.nn.functional.cross_entropy(logits, yb)
        opt.zero_grad(); loss.backward(); opt.step()
        acc = (logits.argmax(1) == yb).float().mean().item()
        print(f"Epoch [0/30] Iter [{it}/40] loss: {loss.item():.4f} accuracy: {acc:.4f}", flush=True)
""")


@pytest.mark.slow
def test_the_first_steps_of_a_real_run_at_ln_10_are_not_a_collapse(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_FIRST_STEPS)
    log = tmp_path / "train.log"
    with log.open("w") as f:
        subprocess.run([sys.executable, str(script), "0"], stdout=f, check=True, timeout=300)
    losses = [float(line.split("loss: ")[1].split()[0]) for line in log.read_text().splitlines()]
    assert all(abs(v - math.log(10)) < 0.01 for v in losses[-5:])  # the run really is still at chance
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.root_cause
