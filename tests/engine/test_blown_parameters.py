"""A loss and a gradient norm both in the millions, log after log, with no rise inside the log: the weights left
their range before the first logged step (issue 13, item 2: no signature, the log's numbers must be read).

Real runs here: SGD at lr 2 with gradient clipping on raw, unnormalised features (values in the thousands) logs
every 250 steps; the first log already shows loss ~1e7 and grad_norm ~2e7 and clipped updates never bring them
down. The same run on standardised features is healthy. A loss in the millions without such gradients is an
objective's own scale (healthy 101: an SVI ELBO of 5.7e8 at init) and is not called a divergence.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]

_RUN = textwrap.dedent("""
    import sys, torch
    torch.manual_seed(0)
    X = torch.randn(512, 16) * float(sys.argv[1])
    y = X @ torch.randn(16, 1) / float(sys.argv[1]) + torch.randn(512, 1)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=float(sys.argv[2]))
    for step in range(1, 3001):
        idx = torch.randint(0, 512, (64,))
        loss = torch.nn.functional.mse_loss(model(X[idx]), y[idx])
        opt.zero_grad(); loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 250 == 0:
            print(f"step {step}: loss={loss.item():.4f} grad_norm={gn.item():.4f} lr={sys.argv[2]}", flush=True)
""")


def _run(tmp_path: Path, scale: str, lr: str) -> Path:
    pytest.importorskip("torch")
    log = tmp_path / "train.log"
    out = subprocess.run([sys.executable, "-c", _RUN, scale, lr], capture_output=True, text=True, timeout=300, check=True)
    log.write_text(out.stdout)
    return log


def test_unnormalised_inputs_keep_loss_and_gradients_in_the_millions(tmp_path):
    log = _run(tmp_path, "3000", "2.0")
    first = log.read_text().splitlines()[0]
    assert float(first.split("loss=")[1].split()[0]) > 1e6  # the run really is out of range at its first log
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", d.root_cause
    assert d.run_status.value == "diverged"
    assert "gradient norm too" in d.root_cause.proximate


def test_the_same_run_on_standardised_inputs_is_no_divergence(tmp_path):
    log = _run(tmp_path, "1", "0.05")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value != "diverged"


def test_a_huge_objective_without_huge_gradients_is_no_divergence():
    log = next((TESTS / "healthy").glob("101-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.root_cause
