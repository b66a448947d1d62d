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


# --- batch 28's own misses, each read on a real run here and on the public log that showed it ---

# Ultralytics prints its losses as a table: a header naming each term, then each epoch's row glued to its bar
ULTRALYTICS_LIKE = """
import sys
import torch
from tqdm import tqdm
torch.manual_seed(0)
head = torch.nn.Linear(8, 6)
opt = torch.optim.SGD(head.parameters(), lr=0.01)
x, box_t, cls_t = torch.randn(32, 8), torch.randn(32, 4), torch.randint(0, 2, (32,))
box_t[3] = float("nan")  # one annotation's box is not a number
for epoch in range(1, 4):
    print(("%11s" * 7) % ("Epoch", "GPU_mem", "box_loss", "cls_loss", "dfl_loss", "Instances", "Size"), flush=True)
    bar = tqdm(range(4), file=sys.stdout, bar_format="{l_bar}{bar:10}{r_bar}")
    for i in bar:
        out = head(x[i * 8:(i + 1) * 8])
        box = torch.nn.functional.smooth_l1_loss(out[:, 2:], box_t[i * 8:(i + 1) * 8])
        cls = torch.nn.functional.cross_entropy(out[:, :2], cls_t[i * 8:(i + 1) * 8])
        opt.zero_grad()
        (box + cls).backward()
        opt.step()
        bar.set_description(("%11s" * 2 + "%11.4g" * 5) % (f"{epoch}/100", "0G", box.item(), cls.item(), 0.9, 8, 640))
    bar.close()
"""


def test_an_ultralytics_loss_table_whose_terms_are_nan_is_the_nan_onset(tmp_path: Path):
    log = run_script(tmp_path, ULTRALYTICS_LIKE)
    assert "nan" in log.read_text() and "box_loss" in log.read_text()
    assert verdict(log)[0] == "nan-inf"


def test_ultralytics_nan_losses_public_log():
    assert verdict(case("1460")) == ("nan-inf", "diverged")  # its every-zero mAP is the NaN's consequence


def test_lightgbm_auc_lines_are_the_validation_series(tmp_path: Path):
    from ml_skills.engine.read.scan import scan_log

    log = run_script(tmp_path, """
        import numpy as np, lightgbm as lgb
        rng = np.random.default_rng(0)
        x = rng.normal(size=(4000, 10)); y = (x[:, 0] + rng.normal(scale=2.0, size=4000) > 0).astype(int)
        tr, va = lgb.Dataset(x[:3000], y[:3000]), lgb.Dataset(x[3000:], y[3000:])
        lgb.train({"objective": "binary", "metric": "auc", "verbose": -1, "learning_rate": 0.05}, tr, num_boost_round=300,
                  valid_sets=[tr, va], valid_names=["training", "valid"], callbacks=[lgb.log_evaluation(20), lgb.early_stopping(50)])
        """, check=True)
    assert "valid's auc" in log.read_text()
    series = {s.name: s for s in scan_log(log).trajectory.series}
    assert series["val_acc"].count >= 3 and series["acc"].count >= 3
    assert verdict(log) == (None, "completed")


def test_a_run_summary_naming_its_best_round_zero_is_no_wait_at_the_first_step():
    # LightGBM's 3,000 rounds, then 'Best validation score' / 'Best iteration: 0': a summary, not a counter at 0
    assert verdict(case("622", "healthy")) == (None, "completed")


def test_the_interpreter_aborting_on_a_refcount_error_is_a_native_crash(tmp_path: Path):
    log = run_script(tmp_path, """
        import ctypes
        for step in range(1, 4):
            print(f"step {step} | loss {1.0 / step:.4f}", flush=True)
        for _ in range(10 ** 9):  # a C extension's missing incref, as ctypes can make one: None's count reaches 0
            ctypes.pythonapi.Py_DecRef(ctypes.py_object(None))
        """)
    assert "Fatal Python error" in log.read_text()
    assert verdict(log) == ("process-crash", "crashed")


def test_accelerate_refusing_the_wrap_policy_is_configuration_public_log():
    # 'Could not find the transformer layer class X in the model', raised while the FSDP wrap policy is built, in a
    # call that also hands the data loaders through: the wrapper's setting, not the data (batch 28's 1445)
    assert verdict(case("1445"))[0] == "config-error"


TWO_RUNS = """
import torch
torch.manual_seed(0)
x, y = torch.randn(256, 16), torch.randint(0, 4, (256,))
vx, vy = torch.randn(128, 16), torch.randint(0, 4, (128,))
vx[:, :2] += torch.nn.functional.one_hot(vy, 4)[:, :2] * 2
x[:, :2] += torch.nn.functional.one_hot(y, 4)[:, :2] * 2
for name, lr in (("Baseline", 0.5), ("Normalized", 0.05)):
    model = torch.nn.Sequential(torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for epoch in range(1, 21):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            vl = torch.nn.functional.cross_entropy(model(vx), vy).item()
        print(f"{name} Epoch {epoch} - Loss={loss.item():.4f}, Val Loss={vl:.4f}", flush=True)
print("Training comparison completed!", flush=True)
"""


def test_a_second_run_in_one_log_is_read_on_its_own_not_as_the_first_run_memorising(tmp_path: Path):
    log = run_script(tmp_path, TWO_RUNS)
    assert "Normalized Epoch 1 " in log.read_text()
    assert verdict(log)[0] is None


def test_two_runs_compared_in_one_log_public_log():
    assert verdict(case("628", "healthy")) == (None, "completed")


def test_a_ctrl_c_in_a_framework_dict_lookup_is_no_wait_public_log():
    # Paddle's op dispatch: `kwargs.get("stop_gradient", False)` is a dict, not a queue; the bar ran at 35 it/s
    assert verdict(case("636", "healthy")) == (None, "unknown")


def test_a_run_that_slowed_and_is_still_stepping_is_degraded_not_hung(tmp_path: Path):
    log = run_script(tmp_path, """
        import sys, time
        from tqdm import tqdm
        for i in tqdm(range(60), file=sys.stdout, mininterval=0, miniters=1):
            time.sleep(0.01 if i < 30 else 0.1)  # the input pipeline falls behind half way
            if i % 5 == 4:  # HF Trainer's log dict, printed after the bar's frame (healthy 637)
                print({"loss": round(0.4 - i / 1000, 4), "epoch": round(i / 30, 2)}, flush=True)
        """)
    cls, status = verdict(log)
    assert cls == "stalled" and status == "degraded"
