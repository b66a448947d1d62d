"""Readings written at batch 28's start, from the previous batches' misses (each on a real run here, and on the public
log that showed the shape): a loss named for its function that goes NaN (GluonCV's `SmoothL1=nan`, batch 27's 1435),
and a terminal session whose shell prompt came back after training with no failure printed (healthy 591)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.engine.batchcase import case, run_script, verdict

# a GluonCV-style detector loop: a classification CrossEntropy and a box SmoothL1 over targets, printed as GluonCV's
# train_ssd.py prints them; one annotation's box is NaN (a degenerate box divided by its zero width), as bad labels make
SSD_LIKE = """
import torch
torch.manual_seed(0)
head = torch.nn.Linear(8, 6)
opt = torch.optim.SGD(head.parameters(), lr=0.001, momentum=0.9)
x = torch.randn(64, 8)
cls_t = torch.randint(0, 2, (64,))
box_t = torch.randn(64, 4)
box_t[5] = torch.tensor(0.0) / torch.tensor(0.0)
print("Start training from [Epoch 0]", flush=True)
for batch in range(1, 501):
    i = (batch * 8) % 64
    out = head(x[i:i + 8])
    ce = torch.nn.functional.cross_entropy(out[:, :2], cls_t[i:i + 8])
    l1 = torch.nn.functional.smooth_l1_loss(out[:, 2:], box_t[i:i + 8])
    opt.zero_grad()
    (ce + l1).backward()
    opt.step()
    if batch % 100 == 99:
        print(f"[Epoch 0][Batch {batch}], Speed: 31.855627 samples/sec, CrossEntropy={ce.item():.6f}, SmoothL1={l1.item():.6f}", flush=True)
"""


def test_a_loss_named_for_its_function_going_nan_is_the_nan_onset(tmp_path: Path):
    log = run_script(tmp_path, SSD_LIKE)
    assert "SmoothL1=nan" in log.read_text()
    assert verdict(log)[0] == "nan-inf"


def test_gluoncv_smoothl1_nan_public_log():
    assert verdict(case("1435"))[0] == "nan-inf"


def test_a_validation_nll_of_nan_alone_is_not_the_training_loss(tmp_path: Path):
    log = run_script(tmp_path, """
        for epoch in range(1, 6):
            print(f"epoch {epoch} | loss {1.0 / epoch:.4f} | val_nll: nan", flush=True)
        print("Done!", flush=True)
        """)
    assert verdict(log)[0] != "nan-inf"


TRAIN = """
for epoch in range(1, 12):
    print(f"Epoch {epoch}: 100%|##########| 74/74 [00:01<00:00, 50.0batch/s, loss={2.0 / epoch:.3f}]", flush=True)
"""


def _session(tmp_path: Path, script: str) -> Path:
    """A real interactive bash session: its prompt, the script's output, and the prompt that comes back after it."""
    (tmp_path / "train.py").write_text(script, encoding="utf-8")
    log = tmp_path / "session.log"
    with log.open("w") as out:
        subprocess.run(["bash", "--norc", "--noprofile", "-i"], check=False, input="python3 train.py\n", text=True, stdout=out,
                       stderr=subprocess.STDOUT, cwd=tmp_path, timeout=120,
                       env={"PATH": "/usr/bin:/bin:/usr/local/bin", "PS1": r"(aidio) [\u@\h \W]\$ ", "HOME": str(tmp_path)})
    return log


def test_a_prompt_after_training_with_no_failure_is_a_finished_run(tmp_path: Path):
    log = _session(tmp_path, TRAIN)
    last = log.read_text().rstrip().splitlines()[-1]
    assert last.startswith("(aidio) [") and "]# " in last or "]$ " in last, last  # bash echoes the 'exit' of end-of-input
    assert verdict(log) == (None, "completed")


def test_without_the_prompt_the_same_output_is_still_going(tmp_path: Path):
    log = run_script(tmp_path, TRAIN)
    assert verdict(log) == (None, "running")


def test_lightning_early_stop_ending_at_the_prompt_public_log():
    assert verdict(case("591", "healthy")) == (None, "completed")
