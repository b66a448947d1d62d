"""A loss logged under its own name ('NoConvLoss=nan' in a tqdm postfix, a GAN's 'g_loss: nan') that goes non-finite
is a NaN loss, though the engine knows no such key: a key that ends in 'loss' and is not an evaluation's is a part
of the objective. Only a non-finite value is read this way, so finite logs parse as before (corpus 830: 151 epochs
with every part of the loss at nan, read as running).

A real PyTorch run on CPU whose two loss terms go to nan after its learning rate is raised 1e4-fold, printing them
under their own names as a progress bar's postfix does.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")

TRAIN = textwrap.dedent("""
    import torch
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = x @ torch.randn(8, 1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(1, 9):
        if epoch == 4:
            opt.param_groups[0]["lr"] = 1e4
        for i in range(0, 512, 64):
            out = model(x[i:i + 64])
            recon = ((out - y[i:i + 64]) ** 2).mean()
            aux = out.abs().mean()
            opt.zero_grad(); (recon + 1e-3 * aux).backward(); opt.step()
        print(f"Epochs: {epoch}/8 [Step={epoch * 8}, ReconLoss={recon.item():.4f}, AuxLoss={aux.item():.4f}, "
              f"LR={opt.param_groups[0]['lr']:.1e}]", flush=True)
""")


def test_a_named_loss_term_at_nan_is_a_nan_loss(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=True)
    log = tmp_path / "train.log"
    log.write_text(out.stdout + out.stderr)
    assert "ReconLoss=nan" in log.read_text() or "ReconLoss=inf" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", (d.primary_cause, log.read_text()[-600:])
