"""A loop that skips a step whose loss is not finite and goes on (issue 13: what ended the run decides).

LL3DA's trainer prints 'Loss in not finite. Skip this training step.' and carries on (healthy 358: eight skips,
then 'Loss 1.51' and the maintainer's 'ignore them'); D-FINE warns 'Skipping batch at iter N (epoch E, batch B):
non-finite loss' (corpus 1138, still skipping at the log's end). Real PyTorch runs on CPU with the same loop: a few
batches of bad input that the run goes past with a finite loss after them, and a learning rate raised 1e6-fold so
that every step after it is skipped to the end.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")

RUN = textwrap.dedent("""
    import math, sys, torch
    torch.manual_seed(0)
    mode = sys.argv[1]
    x = torch.randn(256, 8)
    y = x @ torch.randn(8, 1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for it in range(1, 161):
        xb = x.clone()
        if mode == "bad-batches" and 60 <= it < 66:
            xb[0, 0] = float("nan")  # a corrupt sample in six batches
        if mode == "blow" and it == 100:
            opt.param_groups[0]["lr"] = 1e6
        loss = ((model(xb) - y) ** 2).mean()
        if not math.isfinite(loss.item()):
            print("Loss in not finite. Skip this training step.", flush=True)
            opt.zero_grad()
            continue
        opt.zero_grad(); loss.backward(); opt.step()
        if it % 10 == 0:
            print(f"Epoch [1/1]; Iter [{it}/160]; Loss {loss.item():.4f}; LR {opt.param_groups[0]['lr']:.2e}", flush=True)
""")


def _run(tmp_path: Path, mode: str) -> str:
    script = tmp_path / "train.py"
    script.write_text(RUN)
    log = tmp_path / "train.log"
    out = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=120, check=True)
    log.write_text(out.stdout)
    return str(log)


def test_skips_the_run_went_past_with_a_finite_loss_are_survived(tmp_path):
    log = _run(tmp_path, "bad-batches")
    assert Path(log).read_text().count("Skip this training step") == 6
    d = diagnose(DiagnoseRequest(target=log))
    assert d.primary_cause is None
    assert d.run_status.value in ("recovered", "completed")


def test_skips_to_the_end_are_the_runs_nan(tmp_path):
    log = _run(tmp_path, "blow")
    text = Path(log).read_text()
    assert text.rstrip().endswith("Skip this training step.")
    d = diagnose(DiagnoseRequest(target=log))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
