"""The resume point offered after a NaN is the last checkpoint saved before the NaN's onset, not before the log's last
NaN line: a run that trains on with NaN weights saves NaN checkpoints (the eighth user trial's case04 offered
checkpoint-12000, saved 2,200 steps into NaN; written after the trial). And a save told on two lines ('Saving model
checkpoint to X', then 'checkpoint saved (N bytes)') is one save. A real run here."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.plan import facts
from ml_skills.render import text

pytest.importorskip("torch")

RUN = textwrap.dedent("""
    import logging, os, sys, torch
    logging.basicConfig(format="%(asctime)s %(levelname)s trainer: %(message)s", level=logging.INFO, stream=sys.stdout)
    log = logging.getLogger()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4); opt = torch.optim.SGD(model.parameters(), lr=0.1)
    os.makedirs("checkpoints", exist_ok=True)
    for step in range(1, 121):
        x = torch.randn(16, 8); y = torch.randint(0, 4, (16,))
        p = torch.softmax(model(x), 1).gather(1, y[:, None]).squeeze(1)
        if step == 75:
            p = p * 0  # a rare batch whose target probability underflows: -log(0)
        loss = -torch.log(p).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        log.info(f"step {step}/120 | loss {loss.item():.4f} | lr 0.1")
        if step % 10 == 0:
            path = f"checkpoints/checkpoint-{step}.pt"
            log.info(f"Saving model checkpoint to {path}")
            torch.save(model.state_dict(), path)
            log.info(f"checkpoint saved ({os.path.getsize(path)} bytes)")
""")


def test_after_a_nan_the_resume_point_is_the_last_save_before_its_onset(tmp_path):
    (tmp_path / "train.py").write_text(RUN)
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py"], stdout=out, stderr=subprocess.STDOUT, timeout=120, check=True, cwd=tmp_path)
    body = log.read_text()
    assert "loss inf" in body or "loss nan" in body, body[-1500:]
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", d.root_cause
    resume = [c for c in d.next_commands if "--artifacts" in c]
    assert resume and "checkpoint-70.pt" in resume[0], d.next_commands
    saves = [f for f in d.facts if f.name == "checkpoint_saved"]
    assert all(".pt" in f.value for f in saves), saves  # each save is one fact, with its path, not half of one


def test_the_reports_floor_on_saves_is_the_number_the_facts_keep():
    assert text.SAVES_KEPT == facts.KEPT["checkpoint_saved"]
