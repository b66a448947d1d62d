"""A training loss logged as exactly 0 right after a real value, to the end, with no nan printed anywhere: the steps
behind those logs were non-finite and the logger dropped them from its average (corpus 1072: a T5-11B fine-tune under
DeepSpeed printing {'loss': 6.2645} then {'loss': 0.0} four times while 1995 of 2000 steps were skipped).

A real PyTorch run on CPU whose learning rate is raised 1e6-fold mid-run, logging each window's mean loss over its
finite steps only, as Hugging Face's Trainer does with logging_nan_inf_filter (the default); and the same run left
alone, whose loss falls to small values but never to exactly 0.
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
    blow = sys.argv[1] == "blow"
    x = torch.randn(512, 8)
    y = x @ torch.randn(8, 1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    window = []
    for step in range(1, 121):
        if blow and step == 41:
            opt.param_groups[0]["lr"] = 1e6
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        if math.isfinite(loss.item()):
            window.append(loss.item())  # logging_nan_inf_filter: a non-finite step adds nothing
        if step % 20 == 0:
            mean = sum(window) / 20 if window else 0.0
            print({"loss": round(mean, 4), "learning_rate": opt.param_groups[0]["lr"], "epoch": round(step / 120, 2)}, flush=True)
            window = []
""")


def _run(tmp_path: Path, mode: str) -> Path:
    out = subprocess.run([sys.executable, "-c", RUN, mode], capture_output=True, text=True, timeout=120, check=True)
    log = tmp_path / f"{mode}.log"
    log.write_text(out.stdout + out.stderr)
    return log


def test_a_loss_logged_as_exactly_zero_after_a_real_value_is_a_nan_window(tmp_path: Path) -> None:
    log = _run(tmp_path, "blow")
    assert "'loss': 0.0," in log.read_text() and "nan" not in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", d.evidence
    assert any("logged as exactly 0" in e.text for e in d.evidence), d.evidence


def test_a_loss_that_falls_but_not_to_zero_names_nothing(tmp_path: Path) -> None:
    log = _run(tmp_path, "learn")
    assert "'loss': 0.0," not in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.evidence
