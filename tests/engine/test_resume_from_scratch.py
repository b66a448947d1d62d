"""A resume that could not load its checkpoint and started over from scratch, then completed (the tenth user trial's
case03): degraded, not 'completed after an earlier attempt failed'. Real PyTorch runs appended to one log: a first attempt
that saves checkpoints, then a resubmission with a wider model whose load fails and falls back to a fresh start; the same
resubmission with the same model resumes and is healthy; a first start with no checkpoint at all is healthy too."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytestmark = pytest.mark.slow  # real training scripts in child processes

TRAINER = """
    import logging, os, sys, torch
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s trainer: %(message)s")
    log = logging.getLogger()
    width, steps, resume = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "resume"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.ReLU(), torch.nn.Linear(width, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    start = 0
    ckpt = "checkpoints/last.pt"
    if resume:
        if not os.path.exists(ckpt):
            log.info("No checkpoint found, starting training from scratch")
        else:
            try:
                state = torch.load(ckpt)
                model.load_state_dict(state["model"]); opt.load_state_dict(state["opt"]); start = state["step"]
                log.info(f"resumed from {ckpt} at step {start}")
            except RuntimeError as e:
                log.warning(f"could not restore the training state from {ckpt} ({type(e).__name__}: {e}); training from scratch")
    x = torch.randn(512, 8); y = x[:, :1] * 2
    for step in range(start + 1, steps + 1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 50 == 0:
            log.info(f"step {step}/{steps} loss={loss.item():.5f}")
        if step % 200 == 0:
            os.makedirs("checkpoints", exist_ok=True)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, ckpt)
            log.info(f"Saved checkpoint {ckpt} at step {step}")
    log.info("Training completed.")
"""


def _attempt(run: Path, *args: str) -> None:
    (run / "train.py").write_text(textwrap.dedent(TRAINER), encoding="utf-8")
    with (run / "train.log").open("a") as out:
        subprocess.run([sys.executable, "train.py", *args], stdout=out, stderr=subprocess.STDOUT, cwd=run, check=True,
                       timeout=300, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})


def test_a_resume_whose_load_failed_and_started_over_is_degraded(tmp_path):
    _attempt(tmp_path, "16", "400", "fresh")  # the first attempt, stopped at its budget with checkpoints written
    _attempt(tmp_path, "32", "1000", "resume")  # the resubmission with a wider model
    text = (tmp_path / "train.log").read_text()
    assert "size mismatch for 0.weight" in text and "training from scratch" in text and text.count("Training completed.") == 2
    d = diagnose(DiagnoseRequest(target=str(tmp_path / "train.log")))
    assert d.run_status.value == "degraded"
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"
    assert "started over from scratch" in d.root_cause.root and d.primary_cause_confidence <= 0.7


def test_the_same_resume_with_the_same_model_and_a_first_start_are_healthy(tmp_path):
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    _attempt(resumed, "16", "400", "fresh")
    _attempt(resumed, "16", "1000", "resume")
    assert "resumed from checkpoints/last.pt at step 400" in (resumed / "train.log").read_text()
    first = tmp_path / "first"
    first.mkdir()
    _attempt(first, "16", "400", "resume")  # --resume on an empty run directory: 'No checkpoint found, ... from scratch'
    for run in (resumed, first):
        d = diagnose(DiagnoseRequest(target=str(run / "train.log")))
        assert d.primary_cause is None and d.run_status.value == "completed", run.name
