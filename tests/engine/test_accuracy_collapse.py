"""Training accuracy that falls from its level to chance and stays there is a collapse of the training, whatever
the loss says (a distillation or contrastive loss may even fall as it happens).

Real PyTorch runs on a 100-class task whose logger prints the training accuracy only: at step 51 a callback loads
untrained weights into the running model (what the AlphaNet report called 'just like the network parameters are
re-initialized') while the schedule drops the learning rate 100x, so the run stays near chance. Controls: the same
run with no reset, and a reset the run relearns from at once (its learning rate not dropped).
"""

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
    reset, drop = sys.argv[1] == "reset", sys.argv[2] == "drop"
    torch.manual_seed(0)
    k, d = 100, 32
    centers = torch.randn(k, d) * 3
    y = torch.randint(0, k, (8192,))
    x = centers[y] + torch.randn(8192, d)
    def build():
        return torch.nn.Sequential(torch.nn.Linear(d, 128), torch.nn.ReLU(), torch.nn.Linear(128, k))
    model = build()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    for step in range(1, 71):
        if step == 51:
            if drop:
                for g in opt.param_groups:
                    g["lr"] = 0.005  # the schedule's milestone
            if reset:
                model.load_state_dict(build().state_dict())  # the bug: untrained weights loaded mid-run
        i = torch.randint(0, 8192, (256,))
        logits = model(x[i])
        loss = torch.nn.functional.cross_entropy(logits, y[i])
        opt.zero_grad(); loss.backward(); opt.step()
        acc = (logits.argmax(1) == y[i]).float().mean().item()
        if step % 2 == 0:
            print(f"step {step} accuracy: {acc:.4f}", flush=True)
"""


def _run(tmp_path: Path, reset: str, drop: str) -> tuple[Path, list[float]]:
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py", reset, drop], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                       timeout=300, check=True)
    return log, [float(line.split()[-1]) for line in log.read_text().splitlines()]


def test_accuracy_that_falls_to_chance_and_stays_is_a_collapse(tmp_path):
    log, acc = _run(tmp_path, "reset", "drop")
    assert acc[24] > 0.9 and max(acc[25:]) < 0.25, acc  # really collapsed at step 52 and never came back
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence", (d.primary_cause, acc)
    assert any(a.kind.value == "accuracy-collapse" and a.line_no == 26 for a in d.anomalies), d.anomalies
    assert d.run_status.value == "diverged"


@pytest.mark.parametrize("reset, drop", [("none", "drop"), ("reset", "keep")])
def test_no_collapse_or_one_relearned_at_once_is_not_flagged(tmp_path, reset, drop):
    log, acc = _run(tmp_path, reset, drop)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert not any(a.kind.value == "accuracy-collapse" for a in d.anomalies), (d.anomalies, acc)
    assert d.primary_cause is None, (d.primary_cause, acc)
