"""A run that ends by printing its test score or writing its model once, after its last step, completed.

Real PyTorch runs print no 'done' line: a loop over epochs with no total in its counter, then a test evaluation
and a final save. That is what a finished script prints; the same run read while it is still training (its last
line a periodic checkpoint that names its epoch) is not.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("torch")

TRAIN = """
    import sys, time
    import torch
    epochs, pause, every = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    torch.manual_seed(0)
    x = torch.randn(256, 8); y = (x.sum(1) > 0).long()
    xt = torch.randn(128, 8); yt = (xt.sum(1) > 0).long()
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
        if every and (epoch + 1) % every == 0:
            torch.save(model.state_dict(), f"ckpt_epoch_{epoch}.pt")
            print(f"saved checkpoint ckpt_epoch_{epoch}.pt", flush=True)
        time.sleep(pause)
    acc = (model(xt).argmax(1) == yt).float().mean().item()
    print(f"test accuracy: {acc:.4f}", flush=True)
    torch.save(model.state_dict(), "model.pt")
    print("Saved model to model.pt", flush=True)
"""


def _run(tmp_path: Path, *args: str) -> Path:
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        subprocess.run([sys.executable, "train.py", *args], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                       timeout=300, check=True)
    return log


def test_a_test_score_and_a_final_save_after_the_last_epoch_is_completed(tmp_path):
    log = _run(tmp_path, "12", "0", "0")
    assert log.read_text().splitlines()[-1] == "Saved model to model.pt"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None and d.run_status.value == "completed", (d.run_status, log.read_text())


def test_a_test_score_alone_after_the_last_epoch_is_completed(tmp_path):
    log = _run(tmp_path, "12", "0", "0")
    lines = log.read_text().splitlines()
    cut = tmp_path / "cut.log"  # the same run's log up to its test score (a paste that stops there)
    cut.write_text("\n".join(lines[:-1]) + "\n")
    assert lines[-2].startswith("test accuracy: ")
    d = diagnose(DiagnoseRequest(target=str(cut)))
    assert d.run_status.value == "completed", d.run_status


@pytest.mark.slow
def test_a_run_read_after_a_periodic_checkpoint_is_not_completed(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(TRAIN))
    log = tmp_path / "train.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "train.py", "40", "0.5", "4"], cwd=tmp_path, stdout=out,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                lines = log.read_text().splitlines()
                if len(lines) >= 12 and lines[-1].startswith("saved checkpoint "):
                    break
                time.sleep(0.05)
            else:
                pytest.fail(f"no periodic save seen: {log.read_text()}")
            snapshot = tmp_path / "snapshot.log"  # the log as it stood right after a periodic save, mid-training
            snapshot.write_text("\n".join(lines) + "\n")
        finally:
            proc.kill()
            proc.wait()
    d = diagnose(DiagnoseRequest(target=str(snapshot)))
    assert d.run_status.value != "completed", (d.run_status, snapshot.read_text())


TENSORS = textwrap.dedent("""
    import sys
    import torch
    torch.manual_seed(0)
    x = torch.randn(256, 8); y = (x.sum(1) > 0).long()
    xv = torch.randn(64, 8); yv = (xv.sum(1) > 0).long()
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(int(sys.argv[1])):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        # the values printed as tensors, as a loop that forgot .item() prints them (healthy 181)
        print(f"Epoch {epoch} train loss:", loss, flush=True)
        with torch.no_grad():
            print("Valid loss:", torch.nn.functional.cross_entropy(model(xv), yv), "acc:", (model(xv).argmax(1) == yv).float().mean().item(), flush=True)
    if sys.argv[2] == "test":
        print("testing", flush=True)
        with torch.no_grad():
            print("Test loss:", torch.nn.functional.cross_entropy(model(xv), yv), "acc:", (model(xv).argmax(1) == yv).float().mean().item(), flush=True)
""")


def _tensor_run(tmp_path: Path, tail: str) -> Path:
    log = tmp_path / f"{tail}.log"
    out = subprocess.run([sys.executable, "-c", TENSORS, "5", tail], capture_output=True, text=True, timeout=120, check=True)
    log.write_text(out.stdout)
    return log


def test_a_test_score_printed_as_a_tensor_after_the_last_epochs_validation_is_completion(tmp_path: Path) -> None:
    log = _tensor_run(tmp_path, "test")
    assert "Test loss: tensor(" in log.read_text()
    assert diagnose(DiagnoseRequest(target=str(log))).run_status.value == "completed"


def test_the_same_run_without_its_test_is_not_completed(tmp_path: Path) -> None:
    log = _tensor_run(tmp_path, "none")
    assert diagnose(DiagnoseRequest(target=str(log))).run_status.value != "completed"
