"""A test-set line is the evaluation's, and a loss bump under a held accuracy is no divergence.

The PyTorch MNIST example prints 'Train Epoch: 3 [2560/4096 (62%)]\\tLoss: 0.0123' during training and
'Test set: Average loss: 0.0025, Accuracy: 8789/10000 (88%)' after each epoch. The test line's bare 'loss' was read
as the training loss, so a test loss lower than the training loss looked like a fall, and the next training line
like a blow-up (healthy 182, a VGG run at 99.6% training accuracy, read as diverged). Real PyTorch runs on CPU print
the example's own format strings: one healthy, one whose learning rate is raised 2000x mid-run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]

TRAIN = textwrap.dedent("""
    import sys
    import torch
    boost = float(sys.argv[1])  # the learning rate's factor from epoch 4 on
    torch.manual_seed(0)
    def data(n):
        x = torch.randn(n, 8)
        return x, (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    x, y = data(4096)
    xt, yt = data(1024)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(1, 9):
        if epoch == 4:
            for g in opt.param_groups:
                g["lr"] *= boost
        for i in range(0, 4096, 256):
            loss = torch.nn.functional.cross_entropy(model(x[i:i + 256]), y[i:i + 256])
            opt.zero_grad(); loss.backward(); opt.step()
            if i % 1024 == 0:
                print('Train Epoch: {} [{}/{} ({:.0f}%)]\\tLoss: {:.6f}'.format(epoch, i, 4096, 100. * i / 4096, loss.item()))
        with torch.no_grad():
            out = model(xt)
            test_loss = torch.nn.functional.cross_entropy(out, yt).item()
            correct = (out.argmax(1) == yt).sum().item()
        print('\\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\\n'.format(test_loss, correct, 1024, 100. * correct / 1024))
""")


def _run(tmp_path: Path, boost: float) -> Path:
    script = tmp_path / "main.py"
    script.write_text(TRAIN)
    out = subprocess.run([sys.executable, str(script), str(boost)], capture_output=True, text=True, timeout=120, check=True)
    log = tmp_path / f"train_{boost:g}.log"
    log.write_text(out.stdout)
    return log


def test_test_set_lines_are_the_evaluation_series(tmp_path: Path) -> None:
    log = _run(tmp_path, boost=1.0)
    d = diagnose(DiagnoseRequest(target=str(log)))
    series = {s.name: s for s in d.trajectory}
    text = log.read_text()
    assert series["val_loss"].count == text.count("Test set: Average loss")
    assert series["loss"].count == text.count("Train Epoch")
    assert series["val_acc"].count == text.count("Test set:")
    assert d.primary_cause is None


def test_a_real_blowup_still_reads_as_divergence(tmp_path: Path) -> None:
    log = _run(tmp_path, boost=2000.0)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value in ("optimization-divergence", "nan-inf"), d.primary_cause


def test_a_loss_bump_at_held_training_accuracy_is_not_divergence() -> None:
    log = next((ROOT / "healthy").glob("182-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.primary_cause
