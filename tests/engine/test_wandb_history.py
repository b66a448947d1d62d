"""A log whose only record of its losses is W&B's closing 'Run history:' sparklines still says how the run went.

wandb.finish() prints one sparkline per metric over the whole run; a fine-tune whose eval_loss climbs to the top of
its range while train_loss falls (healthy 182's sibling 179, verbatim: 10 epochs, eval loss rising every epoch) was
read as a run still going. Real wandb runs in offline mode: one that memorises (training loss falling, evaluation
loss rising every epoch), one that learns (both falling); a run whose process exited 0 says so through wandb's
'(success)' in older releases, read as completion (healthy 179).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("wandb")
ROOT = Path(__file__).resolve().parents[1]

RUN = textwrap.dedent("""
    import sys
    import wandb
    memorise = sys.argv[1] == "memorise"
    run = wandb.init(project="finetune", config={"lr": 1e-3})
    for epoch in range(10):
        eval_loss = 1.0 + 0.2 * epoch if memorise else 2.0 / (epoch + 1) + 0.1
        wandb.log({"epoch": epoch, "train_loss": 2.0 / (epoch + 1), "eval_loss": eval_loss})
    run.finish()
""")


def _run(tmp_path: Path, mode: str) -> Path:
    # none of the test process's own W&B settings (the wandb collector sets WANDB_SILENT when it reads a run)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", RUN, mode], capture_output=True, text=True, timeout=180, check=True,
                         env=env, cwd=tmp_path)
    log = tmp_path / f"{mode}.log"
    log.write_text(out.stdout + out.stderr)
    assert "Run history:" in log.read_text(), log.read_text()
    return log


@pytest.mark.slow
def test_a_validation_loss_climbing_in_the_run_history_is_memorisation(tmp_path: Path) -> None:
    d = diagnose(DiagnoseRequest(target=str(_run(tmp_path, "memorise"))))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch"
    assert d.run_status.value == "degraded"
    assert any("run history" in e.text for e in d.evidence)


@pytest.mark.slow
def test_a_run_history_of_falling_losses_names_nothing(tmp_path: Path) -> None:
    d = diagnose(DiagnoseRequest(target=str(_run(tmp_path, "learn"))))
    assert d.primary_cause is None


def test_a_finished_fine_tune_that_memorised_is_degraded() -> None:
    d = diagnose(DiagnoseRequest(target=str(next((ROOT / "healthy").glob("179-*")) / "train.log")))
    assert d.run_status.value == "degraded"
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch"
