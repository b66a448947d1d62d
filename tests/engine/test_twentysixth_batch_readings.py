"""A training script's own NaN guard that raises 'Gradient exploded!' names a non-finite loss, not a config error
(catalog nan-inf loss-is-nan-message; batch 26's 1421, YOLOv3-TensorFlow raising ArithmeticError when its loss is
NaN). A real loop whose loss goes NaN and whose guard raises, and the verbatim public log."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

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
    (tmp_path / "train.py").write_text(textwrap.dedent(_GUARD), encoding="utf-8")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        subprocess.run([sys.executable, "train.py"], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, check=False,
                       timeout=300, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert "ArithmeticError: Gradient exploded!" in log.read_text()
    assert _primary(log) == "nan-inf"


def test_yolov3_tensorflow_gradient_exploded_paste():
    """Verbatim issue-thread log (tests/corpus/1421-*/case.json cites it)."""
    assert _primary(next((TESTS / "corpus").glob("1421-*")) / "train.log") == "nan-inf"
