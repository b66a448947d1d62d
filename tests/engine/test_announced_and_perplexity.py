"""Two ways a NaN reads in real logs that the engine missed on the fifteenth batch (corpus 1066, 1078, 1080).

- An error handler that names the exception on the line above its traceback (Optuna's 'Trial 41 failed because of
  the following error: ValueError("Input contains NaN ...")', logged with exc_info): a paste cut before the
  traceback's own exception line still says which exception ended it. Here a real scikit-learn log_loss is handed the
  predictions of a real softmax that overflowed, inside a trial loop that logs its failure as Optuna does.
- A perplexity or cross-entropy that stands for the loss (OpenNMT's 'acc: 0.19; ppl: nan; xent: nan', a loop's
  'Epoch 10 ; Iter 50/213 ; PPL nan'), placed by the run's own epoch and iteration, not read as a global step 50.
  Real PyTorch language-model steps on CPU whose learning rate is raised until the loss overflows; and a perplexity
  pinned at OpenNMT's cap exp(100), far beyond any vocabulary's uniform guess, by Adam at lr 50 (corpus 1079).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TRIALS = textwrap.dedent("""
    import logging, sys
    import numpy as np
    from sklearn.metrics import log_loss
    logging.basicConfig(format="[%(levelname).1s %(asctime)s] %(message)s", level=logging.INFO, stream=sys.stdout)
    log = logging.getLogger("study")
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(200, 4)), rng.integers(0, 3, 200)
    def objective(scale):
        logits = x @ (rng.normal(size=(4, 3)) * scale)
        e = np.exp(logits)
        return log_loss(y, e / e.sum(1, keepdims=True))
    for trial, scale in enumerate([0.1, 0.5, 1.0, 1e3]):
        try:
            with np.errstate(over="ignore", invalid="ignore"):
                value = objective(scale)
            log.info(f"Trial {trial} finished with value: {value} and parameters: {{'scale': {scale}}}.")
        except Exception as e:
            log.warning(f"Trial {trial} failed because of the following error: {e!r}", exc_info=True)
            sys.exit(1)
""")


def _trials(tmp_path: Path) -> str:
    out = subprocess.run([sys.executable, "-c", TRIALS], check=False, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1 and "failed because of the following error: ValueError(" in out.stdout + out.stderr
    return out.stdout + out.stderr


def test_a_traceback_cut_before_its_exception_line_is_read_from_the_line_that_announced_it(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    text = _trials(tmp_path)
    lines = text.splitlines()
    last_frame = max(i for i, x in enumerate(lines) if x.startswith('  File "'))
    log = tmp_path / "paste.log"
    log.write_text("\n".join(lines[: last_frame + 2]) + "\n")  # a paste cut after the last frame's code line
    assert "ValueError: Input" not in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", d.evidence
    top = d.evidence[0]
    assert "Input contains NaN" in top.text and "failed because of the following error" in lines[top.line_no - 1]


def test_the_whole_traceback_names_non_finite_predictions(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    log = tmp_path / "whole.log"
    log.write_text(_trials(tmp_path))
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", d.evidence


LM = textwrap.dedent("""
    import math, sys, torch
    torch.manual_seed(0)
    shape = sys.argv[1]
    vocab, dim = 50, 16
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, dim), torch.nn.Linear(dim, vocab))
    # 'capped': Adam at lr 50 (OpenNMT's '-optim adam -learning_rate 1.0' of corpus 1079): the loss sits in the thousands
    opt = torch.optim.Adam(model.parameters(), lr=50.0) if shape == "capped" else torch.optim.SGD(model.parameters(), lr=0.5)
    data = torch.randint(0, vocab, (64, 9))
    step = 0
    for epoch in range(1, 6):
        if epoch == 4 and shape != "capped":
            opt.param_groups[0]["lr"] = 1e12  # a schedule that multiplies where it should decay
        for it in range(1, 51):
            step += 1
            logits = model(data[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), data[:, 1:].reshape(-1))
            opt.zero_grad(); loss.backward(); opt.step()
            acc = (logits.argmax(-1) == data[:, 1:]).float().mean().item()
            ppl = math.exp(loss.item()) if math.isfinite(loss.item()) and loss.item() < 700 else float("nan")
            if it % 10:
                continue
            if shape == "capped":  # OpenNMT prints exp(min(loss, 100))
                print(f"Epoch {epoch:2d}, {it:5d}/   50; acc: {100 * acc:6.2f}; ppl: {math.exp(min(loss.item(), 100)):6.2f}; "
                      f"3324 src tok/s; 4592 tgt tok/s; {step:6d} s elapsed", flush=True)
            elif shape == "onmt":
                print(f"[INFO] Step {step}/250; acc: {100 * acc:6.2f}; ppl: {ppl:6.2f}; xent: {loss.item():.2f}; "
                      f"lr: {opt.param_groups[0]['lr']:.5f}; 1928/2310 tok/s; {step} sec", flush=True)
            else:
                print(f"Epoch {epoch} ; Iter {it}/50 ; LR {opt.param_groups[0]['lr']:.4f} ; Target tokens/s 2135 ; "
                      f"PPL {ppl:.2f} ;", flush=True)
""")


def _lm(tmp_path: Path, shape: str) -> Path:
    out = subprocess.run([sys.executable, "-c", LM, shape], capture_output=True, text=True, timeout=600, check=True)
    log = tmp_path / f"{shape}.log"
    log.write_text(out.stdout + out.stderr)
    assert "nan" in log.read_text() or shape == "capped"
    return log


@pytest.mark.parametrize("shape", ["onmt", "epoch-iter"])
def test_a_perplexity_gone_nan_is_a_nan_loss(tmp_path: Path, shape: str) -> None:
    pytest.importorskip("torch")
    d = diagnose(DiagnoseRequest(target=str(_lm(tmp_path, shape))))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf", d.evidence
    onset = next(e for e in d.evidence if "first non-finite" in e.text)
    assert "within the first 100 steps" not in onset.text  # three epochs of 50 iterations came before it
    if shape == "epoch-iter":
        assert "epoch 4, iteration" in onset.text, onset.text


def test_a_perplexity_pinned_beyond_any_vocabulary_is_divergence(tmp_path: Path) -> None:
    """Adam at lr 50: the loss stays finite in the thousands and the printed perplexity at OpenNMT's cap exp(100)."""
    pytest.importorskip("torch")
    log = _lm(tmp_path, "capped")
    assert "ppl: 26881171418161356094253400435962903554686976.00" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", d.evidence
    assert any("perplexity is 2.688e+43" in e.text for e in d.evidence), d.evidence
