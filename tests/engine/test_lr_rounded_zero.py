"""A learning rate printed as 'lr:0.00000' is a rate below the print's precision when the loss it moves keeps falling
(analyse/lrzero._loss_still_falls; batch 26's 580, a Paddle fine-tune whose every line prints lr:0.00000): no
'learning rate 0' config error then. A real rate of exactly 0 is still read: its epochs repeat their losses. Real runs."""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.engine.batchcase import run_script

_TRAIN = """
    import sys, torch
    torch.manual_seed(0)
    x = torch.randn(512, 16) * 30; w = torch.randn(16, 1); y = x @ w + 0.1 * torch.randn(512, 1)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=float(sys.argv[1]))
    for epoch in range(1, 4):
        for i in range(0, 512, 64):
            loss = torch.nn.functional.mse_loss(model(x[i:i + 64]), y[i:i + 64])
            opt.zero_grad(); loss.backward(); opt.step()
            print(f"Epoch {epoch}[{i + 64}/512]: loss:{loss.item():.5f}, lr:{opt.param_groups[0]['lr']:.5f}", flush=True)
"""


def _read(tmp_path: Path, lr: str) -> str | None:
    log = run_script(tmp_path, _TRAIN, lr, check=True)
    assert "lr:0.00000" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    return d.primary_cause.value if d.primary_cause else None


def test_a_rate_that_rounds_to_zero_while_the_loss_falls_is_no_config_error(tmp_path: Path):
    assert _read(tmp_path, "0.000004") is None


def test_a_rate_of_exactly_zero_is_still_read(tmp_path: Path):
    assert _read(tmp_path, "0") is not None
