"""A validation accuracy far under the training accuracy, evaluation after evaluation, is an evaluation mismatch.

Prospective case 662 (keras-team/keras#6977: an Inception fine-tune at training accuracy 0.95 and validation accuracy
0.20-0.25 for every epoch, validation loss 6-6.7 against 0.14, then 0.20 when evaluated on the training data itself:
BatchNorm in inference mode) was read as "no failure" because the validation loss fell a little and never climbed,
so the memorisation rule (a climbing validation loss) did not fire. The run here is real (PyTorch on the CPU): a
fine-tune whose evaluation path reads the feature columns in another order than training does; its control reads
them in the same order.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

SCRIPT = r'''import sys
import torch
from torch import nn

torch.manual_seed(0)
EVAL_COLUMNS = [int(c) for c in sys.argv[1].split(',')]
centers = torch.randn(4, 8) * 1.5
def sample(n):
    y = torch.randint(0, 4, (n,))
    return centers[y] + torch.randn(n, 8), y
x_train, y_train = sample(2048)
x_val, y_val = sample(512)
mean, std = x_train.mean(0), x_train.std(0)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
loss_fn = nn.CrossEntropyLoss()

def fit(opt, epochs, report):
    for epoch in range(1, epochs + 1):
        model.train()
        for i in range(0, 2048, 64):
            xb, yb = (x_train[i:i + 64] - mean) / std, y_train[i:i + 64]  # training normalises its inputs
            loss = loss_fn(model(xb), yb)
            opt.zero_grad(); loss.backward(); opt.step()
        if report:
            model.eval()
            with torch.no_grad():
                out = model((x_train - mean) / std)
                tr_loss, tr_acc = loss_fn(out, y_train).item(), (out.argmax(1) == y_train).float().mean().item()
                vout = model(((x_val - mean) / std)[:, EVAL_COLUMNS])  # BUG when EVAL_COLUMNS is not 0..7
                v_loss, v_acc = loss_fn(vout, y_val).item(), (vout.argmax(1) == y_val).float().mean().item()
            print(f"Epoch {epoch}/{epochs} - loss: {tr_loss:.4f} - acc: {tr_acc:.4f} - val_loss: {v_loss:.4f} - val_acc: {v_acc:.4f}", flush=True)

fit(torch.optim.Adam(model.parameters(), lr=1e-2), 20, report=False)  # the pretrained model
print("Loaded pretrained weights; fine-tuning", flush=True)
fit(torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.5), 6, report=True)
print("Training finished.")
'''


def _run(tmp_path: Path, columns: str) -> Path:
    (tmp_path / "train.py").write_text(SCRIPT)
    log = tmp_path / "train.log"
    with log.open("w") as out:
        p = subprocess.run([sys.executable, "train.py", columns], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                           timeout=300, check=False)
    assert p.returncode == 0, log.read_text()[-2000:]
    return log


@pytest.mark.slow
def test_evaluation_reading_other_columns_is_an_evaluation_mismatch(tmp_path: Path) -> None:
    log = _run(tmp_path, "7,6,5,4,3,2,1,0")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.root_cause
    assert d.run_status.value == "degraded"
    assert "validation accuracy" in d.root_cause.proximate and "Epoch 6/6" in log.read_text().splitlines()[d.root_cause.proximate_line.line_no - 1]


@pytest.mark.slow
def test_the_same_fine_tune_evaluated_right_is_not_a_failure(tmp_path: Path) -> None:
    log = _run(tmp_path, "0,1,2,3,4,5,6,7")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.root_cause
    assert d.run_status.value == "completed"


# Batch 19's 1254 (a tf.keras classifier at training loss 0.07 and accuracy 0.976, validation accuracy 0.97 and
# validation loss 8 to 20): the validation loss and accuracy disagree. Real here: the evaluation divides the logits by
# a temperature meant to multiply them, which leaves the arg-max (the accuracy) as it is and makes every wrong
# prediction absurdly confident in the loss. Printed with Keras' own metric names.
TEMPERATURE_SCRIPT = r'''import sys
import torch
from torch import nn

torch.manual_seed(0)
TEMPERATURE = float(sys.argv[1])
centers = torch.randn(4, 8) * 1.5
def sample(n):
    y = torch.randint(0, 4, (n,))
    return centers[y] + torch.randn(n, 8), y
x_train, y_train = sample(2048)
x_val, y_val = sample(512)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
loss_fn = nn.CrossEntropyLoss()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(1, 9):
    print(f"Epoch {epoch}/8", flush=True)
    for i in range(0, 2048, 64):
        loss = loss_fn(model(x_train[i:i + 64]), y_train[i:i + 64])
        opt.zero_grad(); loss.backward(); opt.step()
    with torch.no_grad():
        out = model(x_train)
        tr_loss, tr_acc = loss_fn(out, y_train).item(), (out.argmax(1) == y_train).float().mean().item()
        vout = model(x_val) / TEMPERATURE  # BUG when TEMPERATURE is not 1: calibration meant to multiply
        v_loss, v_acc = loss_fn(vout, y_val).item(), (vout.argmax(1) == y_val).float().mean().item()
    print(f"32/32 [==============================] - 0s 2ms/step - loss: {tr_loss:.4f} - sparse_categorical_accuracy: "
          f"{tr_acc:.4f} - val_loss: {v_loss:.4f} - val_sparse_categorical_accuracy: {v_acc:.4f}", flush=True)
'''


def _temperature_run(tmp_path: Path, temperature: str) -> Path:
    (tmp_path / "train.py").write_text(TEMPERATURE_SCRIPT)
    log = tmp_path / "train.log"
    with log.open("w") as out:
        subprocess.run([sys.executable, "train.py", temperature], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                       timeout=300, check=True)
    return log


def test_a_validation_loss_far_above_training_beside_the_same_accuracy_is_an_evaluation_mismatch(tmp_path: Path) -> None:
    log = _temperature_run(tmp_path, "0.01")
    last = log.read_text().splitlines()[-1]
    v_loss, v_acc = float(last.split("val_loss: ")[1].split()[0]), float(last.split("val_sparse_categorical_accuracy: ")[1])
    assert v_loss > 20 * float(last.split(" - loss: ")[1].split()[0]) and v_acc > 0.8  # the shape 1254 has
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.root_cause
    assert "disagree" in d.root_cause.proximate


def test_the_same_run_evaluated_at_temperature_one_is_not_a_failure(tmp_path: Path) -> None:
    log = _temperature_run(tmp_path, "1")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.root_cause
