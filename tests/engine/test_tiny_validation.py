"""A perfect validation score at the first evaluation is leakage only when the validation set is big enough to
say so: a run that says its validation set holds 16 images and scores 16/16 is not flagged, the same run scoring
1.0 on 2,000 items is (real PyTorch runs on an easy, separable task)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")

TRAIN = """
    import sys
    import torch
    n_val = int(sys.argv[1])
    torch.manual_seed(0)
    def data(n):
        x = torch.randn(n, 4)
        x[:, 0] = torch.where(x[:, 0] > 0, x[:, 0] + 2, x[:, 0] - 2)  # a margin: separable from the first epoch
        return x, (x[:, 0] > 0).long()
    x, y = data(4096)
    xv, yv = data(n_val)
    print(f"[TRAIN] Loaded {len(x)} images.", flush=True)
    print(f"[VAL] Loaded {len(xv)} images.", flush=True)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(1, 7):
        for i in range(0, 4096, 256):
            loss = torch.nn.functional.cross_entropy(model(x[i:i + 256]), y[i:i + 256])
            opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            val_loss = torch.nn.functional.cross_entropy(model(xv), yv).item()
            val_acc = (model(xv).argmax(1) == yv).float().mean().item()
        print(f"epoch {epoch} loss {loss.item():.4f} val_loss {val_loss:.4f} val_acc {val_acc:.4f}", flush=True)
"""


def _run(tmp_path: Path, n_val: int) -> tuple[Path, str]:
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py", str(n_val)], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                       timeout=300, check=True)
    return log, log.read_text()


def test_a_perfect_score_on_a_16_item_validation_set_is_not_leakage(tmp_path):
    log, text = _run(tmp_path, 16)
    assert "val_acc 1.0000" in text.splitlines()[2], text  # 16/16 at the first evaluation
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, (d.primary_cause, text)
    assert not any(a.kind.value == "early-perfect-validation" for a in d.anomalies), d.anomalies


def test_a_perfect_score_on_a_large_validation_set_is_still_flagged(tmp_path):
    log, text = _run(tmp_path, 2000)
    first = text.splitlines()[2]
    if "val_acc 1.0000" not in first:
        pytest.skip(f"this run did not score a perfect first evaluation: {first}")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", (d.primary_cause, text)
