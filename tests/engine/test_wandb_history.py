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


def _offline(tmp_path: Path, script: str, mode: str) -> Path:
    """Run `script` with W&B offline in tmp_path; its console output (what wandb.finish() prints too) as a log."""
    # none of the test process's own W&B settings (the wandb collector sets WANDB_SILENT when it reads a run)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, timeout=600, check=True,
                         env=env, cwd=tmp_path)
    log = tmp_path / f"{mode}.log"
    log.write_text(out.stdout + out.stderr)
    return log


def _run(tmp_path: Path, mode: str) -> Path:
    log = _offline(tmp_path, RUN, mode)
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


CLASSIFY = textwrap.dedent("""
    import sys
    import torch
    import wandb
    torch.manual_seed(0)
    learnable = sys.argv[1] == "learn"
    w_true = torch.randn(16, 10)
    def batch(n):
        x = torch.randn(n, 16)
        y = (x @ w_true).argmax(1) if learnable else torch.randint(0, 10, (n,))  # noise labels: nothing to learn
        return x, y
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    xv, yv = batch(2048)
    run = wandb.init(project="video-classification", name="late-fusion")
    for step in range(30):
        x, y = batch(2048)
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            vout = model(xv)
        wandb.log({"loss/train": loss.item(), "accuracy/train": 100 * (out.argmax(1) == y).float().mean().item(),
                   "loss/validation": torch.nn.functional.cross_entropy(vout, yv).item(),
                   "accuracy/validation": 100 * (vout.argmax(1) == yv).float().mean().item()})
    run.finish()
""")


def _classify(tmp_path: Path, mode: str) -> Path:
    log = _offline(tmp_path, CLASSIFY, mode)
    assert "Run summary:" in log.read_text(), log.read_text()
    return log


@pytest.mark.slow
def test_a_run_summary_at_ln_c_and_one_in_c_accuracy_is_a_classifier_that_never_learned(tmp_path: Path) -> None:
    """A real 10-class classifier trained 30 steps on labels the inputs do not determine ends at loss ~ln 10 and
    accuracy ~10% in train and validation: W&B's summary alone says the run learned nothing (corpus 974's shape)."""
    pytest.importorskip("torch")
    d = diagnose(DiagnoseRequest(target=str(_classify(tmp_path, "noise"))))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence"
    assert any("ends at chance" in e.text and "over 10 classes" in e.text for e in d.evidence), d.evidence


@pytest.mark.slow
def test_a_classifier_that_learned_is_not_at_chance(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    d = diagnose(DiagnoseRequest(target=str(_classify(tmp_path, "learn"))))
    assert not any("ends at chance" in e.text for e in d.evidence), d.evidence
    assert d.primary_cause is None


HF_REPORTING = textwrap.dedent("""
    import time
    import torch
    import wandb
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = x @ torch.randn(8, 1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    run = wandb.init(project="huggingface", name="projector-pretrain")
    start, losses = time.time(), []
    for step in range(1, 41):
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        losses.append(loss.item())
        if step % 5 == 0:  # the Trainer's logging_steps
            print({"loss": round(loss.item(), 4), "learning_rate": 0.05 * (1 - step / 40), "epoch": step / 40}, flush=True)
        wandb.log({"train/loss": round(loss.item(), 4), "train/learning_rate": 0.05 * (1 - step / 40),
                   "train/epoch": step / 40, "train/global_step": step})
    # what the Trainer prints and reports once its loop returns: the mean loss of the whole run, not the last step's
    final = {"train_runtime": round(time.time() - start, 4), "train_samples_per_second": 7.11,
             "train_loss": sum(losses) / len(losses), "epoch": 1.0}
    print(final, flush=True)
    wandb.log({"train/train_runtime": final["train_runtime"], "train/train_loss": final["train_loss"]})
    run.finish()
""")


@pytest.mark.slow
def test_the_trainers_whole_run_mean_loss_is_not_a_last_step(tmp_path: Path) -> None:
    """Hugging Face's final 'train_loss' (printed with train_runtime, and as train/train_loss in W&B's summary) is the
    mean over the run: far above the last step's loss of a run that learned, it is no rise. A guard on a real run; the
    case that showed it (healthy 285, two ranks printing two different means) is in the healthy suite."""
    pytest.importorskip("torch")
    log = _offline(tmp_path, HF_REPORTING, "pretrain")
    assert "train/train_loss" in log.read_text() and "'train_runtime'" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.evidence
