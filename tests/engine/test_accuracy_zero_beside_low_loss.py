"""An accuracy of exactly 0, log after log, beside a cross-entropy at or under ln 2 cannot be the model's: at that
loss the right class gets over half the probability on some samples, so the accuracy is computed against something
else (corpus 1081: OpenNMT printing 'acc: 0.00; ppl: 1.64' for a whole epoch).

A real PyTorch copy task on CPU learns to a perplexity under 2; one run computes its accuracy with integer division
(a real bug: correct // total is 0 until every token is right), one correctly.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")

COPY = textwrap.dedent("""
    import math, sys, torch
    torch.manual_seed(0)
    integer = sys.argv[1] == "integer-division"
    vocab, dim, length = 50, 32, 8
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, dim), torch.nn.Linear(dim, vocab))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for step in range(1, 301):
        x = torch.randint(10, vocab, (64, length))
        noisy = torch.rand(x.shape) < 0.05  # one target in twenty replaced: the copy is learnable, never perfect
        y = torch.where(noisy, torch.randint(10, vocab, x.shape), x)
        logits = model(x)  # (batch, length, vocab): copy each token
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        opt.zero_grad(); loss.backward(); opt.step()
        correct, total = int((logits.argmax(-1) == y).sum()), y.numel()
        acc = 100 * (correct // total) if integer else 100 * correct / total
        if step % 20 == 0:
            print(f"Epoch  1, {step:5d}/  300; acc: {acc:6.2f}; ppl: {math.exp(loss.item()):6.2f}; "
                  f"5298 src tok/s; 5708 tgt tok/s; {step // 10:6d} s elapsed", flush=True)
""")


def _run(tmp_path: Path, mode: str) -> Path:
    out = subprocess.run([sys.executable, "-c", COPY, mode], capture_output=True, text=True, timeout=120, check=True)
    log = tmp_path / f"{mode}.log"
    log.write_text(out.stdout + out.stderr)
    return log


def test_accuracy_zero_while_the_perplexity_is_under_two_is_a_broken_metric(tmp_path: Path) -> None:
    log = _run(tmp_path, "integer-division")
    assert "acc:   0.00; ppl:   1." in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.evidence
    assert any("accuracy 0 at" in e.text for e in d.evidence), d.evidence


def test_a_right_accuracy_beside_the_same_loss_names_nothing(tmp_path: Path) -> None:
    log = _run(tmp_path, "right")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert not any("accuracy 0 at" in e.text for e in d.evidence), d.evidence
    assert d.primary_cause is None
