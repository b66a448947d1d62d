"""A checkpoint whose save raised is no resume point (fifth user trial, case 03: the report offered the half-written
checkpoint-23000 as the newest save). A real run saves every 5 steps and its third save, to /dev/full, fails inside
torch.save: the facts and the next command name the last save that completed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

_RUN = textwrap.dedent("""
    import os, torch
    model = torch.nn.Linear(64, 64); opt = torch.optim.SGD(model.parameters(), lr=0.1)
    os.makedirs("checkpoints", exist_ok=True)
    for step in range(1, 16):
        loss = model(torch.randn(8, 64)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"step {step}/100 | loss {loss.item():.4f}", flush=True)
        if step % 5 == 0:
            path = f"checkpoints/checkpoint-{step}.pt"
            print(f"Saving model checkpoint to {path}", flush=True)
            torch.save(model.state_dict(), "/dev/full" if step == 15 else path)
""")


def test_the_save_that_raised_is_not_the_last_checkpoint(tmp_path: Path):
    pytest.importorskip("torch")
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    r = subprocess.run([sys.executable, "-c", _RUN], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 1 and "Saving model checkpoint to checkpoints/checkpoint-15.pt" in r.stdout, r.stderr[-800:]
    log = tmp_path / "train.log"
    log.write_text(r.stdout + r.stderr)
    d = diagnose(DiagnoseRequest(target=str(log)))
    saves = [f.value for f in d.facts if f.name == "checkpoint_saved"]
    assert saves and "checkpoint-10.pt" in saves[-1], saves
    assert not any("checkpoint-15" in f.value for f in d.facts if f.name == "checkpoint_saved")
    assert not any("checkpoint-15" in c for c in d.next_commands), d.next_commands
