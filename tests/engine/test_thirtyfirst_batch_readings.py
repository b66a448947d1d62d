"""Batch 31's misses, read as general behaviours (docs/accuracy.md, batch 31), and one change written before the batch:

- an epoch header on a line of its own ('[Epoch 1/20]' after a logger's prefix) gives its epoch to the metric lines
  under it, so a second run appended to the log is a new run, not a loss that jumped (healthy 606);
- a failure logged as a WARNING that the log stops right after (fairseq's 'OOM: Ran out of memory ...' and the memory
  summary it prints), with no progress after it, is the run's last account (1534); THC's 'error=2 : out of memory'
  is CUDA's out-of-memory (1533);
- a boosting round's held-out error named l2, rmse, mae (LightGBM's 'valid_0's l2', XGBoost's 'validation_0-rmse')
  is read as that set's loss, so NaN from round 0 is the NaN it is (1549);
- a GAN's generator and discriminator losses: one at exactly 0, or both unchanged, log after log (1503, 1553);
- a detector's box-regression loss at exactly 0 at every log: no ground-truth box reaches the heads (1551, 1170);
- a script's closing timer on its own line ('Completed in 253.5 seconds') ends the run (healthy 674);
- a kill long after the last step (its log's own clock) ended a stall (the tenth user trial's case05).

Real runs where the shape runs here (PyTorch and LightGBM on the CPU); the public logs themselves where it cannot
(fairseq's CUDA OOM)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose
from ml_skills.engine.read.metrics import parse_line

from tests.engine.batchcase import case, run_script, verdict

pytestmark = pytest.mark.slow  # real training scripts in child processes

APPENDED_RUNS = """
    import logging, random, sys
    logging.basicConfig(filename="finetune.log", level=logging.INFO, format="%(asctime)s - %(levelname)s - %(message)s")
    log = logging.getLogger()
    random.seed(0)
    loss, rate = 3.2, float(sys.argv[1])  # the second fine-tuning (frozen layers, fewer shots) learns slowly
    for epoch in range(1, 9):
        log.info(f"[Epoch {epoch}/8]")
        loss *= rate
        log.info(f"Train Loss: {loss + random.random() * 0.01:.4f}, Train Acc: {1 - loss / 4:.4f}")
    log.info("Saved model.pt")
"""


def test_an_epoch_header_on_its_own_line_numbers_the_lines_under_it(tmp_path):
    """Two fine-tuning runs appended to one logging file: the second starts again at its epoch 1 with its loss back at
    its start, and learns slowly. Read with no counter, the loss 'rose from 0.03 to 3.1 and stays high'; read with the
    header's epochs, the counters went back, and the last run is a healthy one."""
    for rate in ("0.55", "0.97"):
        run_script(tmp_path, APPENDED_RUNS, rate, check=True)
    log = tmp_path / "finetune.log"  # the logging file both runs appended to
    assert log.read_text().count("[Epoch 1/8]") == 2
    assert verdict(log)[0] is None


def test_the_public_appended_runs_log_is_no_divergence():
    assert verdict(case("606", "healthy"))[0] is None


def test_a_warning_the_log_stops_after_is_its_last_account_public_logs():
    assert verdict(case("1534")) == ("oom", "crashed")  # fairseq's OOM warning, then its memory summary, then nothing
    assert verdict(case("1533")) == ("oom", "crashed")  # THC's error=2, 'skipping batch', a traceback cut in backward


def test_a_boosting_rounds_held_out_l2_is_read_as_its_loss(tmp_path):
    log = run_script(tmp_path, """
        import numpy as np, lightgbm as lgb
        rng = np.random.default_rng(0)
        X = rng.normal(size=(400, 5)); y = 2 * X[:, 0] + rng.normal(size=400)
        Xv = rng.normal(size=(100, 5)); yv = 2 * Xv[:, 0]
        lgb.train({"objective": "regression", "verbose": -1, "num_threads": 1}, lgb.Dataset(X, y), 8,
                  valid_sets=[lgb.Dataset(Xv, yv)], callbacks=[lgb.log_evaluation(1)])
    """, check=True)
    rounds = [line for line in log.read_text().splitlines() if "valid_0's l2:" in line]
    assert len(rounds) == 8
    parsed = [parse_line(line) for line in rounds]
    assert all(p is not None and "val_loss" in p[0] for p in parsed)
    assert [p[1] for p in parsed if p is not None] == [float(i) for i in range(1, 9)]


def test_rmse_nan_from_round_zero_is_nan_public_log():
    assert verdict(case("1549")) == ("nan-inf", "diverged")


GAN = """
    import torch, torch.nn as nn
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    # a discriminator ending in a hard sigmoid, trained by SGD at a learning rate 50,000x the generator's: it
    # separates real from fake outright, its outputs saturate at exactly 1 and 0, and no gradient goes back
    D = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1), nn.Hardsigmoid())
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-5)
    opt_d = torch.optim.SGD(D.parameters(), lr=0.5)
    bce = nn.BCELoss()
    for epoch in range(1, 4):
        for i in range(40):
            real = torch.randn(64, 2) * 0.1 + 5.0
            fake = G(torch.randn(64, 8))
            d_loss = bce(D(real), torch.ones(64, 1)) + bce(D(fake.detach()), torch.zeros(64, 1))
            opt_d.zero_grad(); d_loss.backward(); opt_d.step()
            g_loss = bce(D(fake), torch.ones(64, 1))
            opt_g.zero_grad(); g_loss.backward(); opt_g.step()
            if i % 4 == 0:
                print(f"Epoch: [{epoch:2d}/3] [{i:4d}/  40] d_loss: {d_loss.item():.8f}, g_loss: {g_loss.item():.8f}", flush=True)
"""


def test_a_gan_whose_discriminator_wins_outright_is_a_stopped_game(tmp_path):
    log = run_script(tmp_path, GAN, check=True)
    lines = [line for line in log.read_text().splitlines() if "g_loss" in line]
    assert len(lines) == 30
    assert lines[-1].endswith("d_loss: 0.00000000, g_loss: 100.00000000")  # BCE's log clamped at -100
    assert verdict(log) == ("optimization-divergence", "degraded")


def test_gan_losses_pinned_public_logs():
    assert verdict(case("1553")) == ("optimization-divergence", "degraded")  # g_loss 0.00000000 at every step
    assert verdict(case("1503")) == ("optimization-divergence", "degraded")  # Gen_loss -0.0, Dis_loss 13.82


BOXES = """
    import json, torch, torch.nn as nn
    torch.manual_seed(0)
    # the annotations name category 'Car'; the config asks for 'car': every box is dropped at load
    ann = [{"boxes": [[10, 10, 40, 40]], "labels": ["Car"]} for _ in range(64)]
    classes = ["car", "person"]
    targets = [[b for b, l in zip(a["boxes"], a["labels"]) if l in classes] for a in ann]
    head = nn.Linear(32, 4 + len(classes) + 1)
    opt = torch.optim.SGD(head.parameters(), lr=0.01)
    for it in range(1, 121):
        feats = torch.randn(16, 32)
        out = head(feats)
        boxes = [torch.tensor(t, dtype=torch.float32) for t in targets[it % 64:it % 64 + 16]]
        pos = [i for i, b in enumerate(boxes) if len(b)]
        cls_target = torch.tensor([1 if i in pos else 0 for i in range(16)])
        loss_cls = nn.functional.cross_entropy(out[:, 4:], cls_target)
        if pos:
            loss_bbox = nn.functional.smooth_l1_loss(out[pos, :4], torch.stack([boxes[i][0] for i in pos]))
        else:
            loss_bbox = out[:, :4].sum() * 0  # no positive proposal (mmdet's own way): the box loss sums over nothing
        acc = (out[:, 4:].argmax(1) == cls_target).float().mean() * 100
        loss = loss_cls + loss_bbox
        opt.zero_grad(); loss.backward(); opt.step()
        if it % 10 == 0:
            print(f"Epoch [1][{it}/120]\\tlr: 1.000e-02, loss_cls: {loss_cls.item():.4f}, acc: {acc.item():.4f}, "
                  f"loss_bbox: {loss_bbox.item():.4f}, loss: {loss.item():.4f}", flush=True)
"""


def test_a_box_loss_at_zero_at_every_log_is_annotations_that_never_arrive(tmp_path):
    log = run_script(tmp_path, BOXES, check=True)
    assert len(re.findall(r"loss_bbox: -?0\.0000,", log.read_text())) == 12  # mmdet's own 'sum() * 0': -0.0 too
    assert verdict(log) == ("data-pipeline", "degraded")


def test_box_loss_zero_public_logs():
    assert verdict(case("1551")) == ("data-pipeline", "degraded")
    assert verdict(case("1170")) == ("data-pipeline", "degraded")


def test_a_closing_timer_on_its_own_line_ends_the_run(tmp_path):
    log = run_script(tmp_path, """
        import time
        t0 = time.time()
        for epoch in range(1, 6):
            print(f"Epoch {epoch}/5 - loss: {1.0 / epoch:.4f}", flush=True)
        print("WARNING: Sets are not currently considered sequences", flush=True)
        print(f"Completed in {time.time() - t0 + 253.0:.1f} seconds", flush=True)
    """, check=True)
    assert verdict(log) == (None, "completed")
    assert verdict(case("674", "healthy")) == (None, "completed")


STALL = """
    import logging, os, signal, sys, time
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s trainer: %(message)s")
    log = logging.getLogger()
    def stop(signum, frame):
        log.warning("Received SIGTERM (signal 15): stopping now")
        sys.exit(143)
    signal.signal(signal.SIGTERM, stop)
    os.mkfifo("shard-00007")
    loss = 5.0
    for step in range(1, 301):
        time.sleep(0.01)
        loss *= 0.995
        log.info(f"step {step}/600 | loss {loss:.4f} | 10.1 ms/step")
    log.info("opening shard shard-00007")
    open("shard-00007").read()  # a named pipe nobody writes: the read blocks until the job is killed
"""


def test_a_kill_long_after_the_last_step_ended_a_stall(tmp_path):
    """A loop stepping every 10 ms blocks on a shard that never arrives; `timeout` SIGTERMs it 65 s later. The kill is
    what ended the run; the log's own clock says it had stopped stepping first (trial 10's case05, smaller)."""
    (tmp_path / "train.py").write_text(textwrap.dedent(STALL), encoding="utf-8")
    log = tmp_path / "train.log"
    with log.open("w") as out:
        subprocess.run(["timeout", "-s", "TERM", "65", sys.executable, "train.py"], check=False, stdout=out, stderr=subprocess.STDOUT,
                       cwd=tmp_path, timeout=200, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    text = log.read_text()
    assert "step 300/600" in text and "Received SIGTERM" in text
    assert verdict(log) == ("stalled", "hung")


SHORT_SCHEDULE = """
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    # the schedule's length is one epoch (50 steps) in a 1,000-step run: the rate is 0 from step 50 on
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / 50))
    w = torch.randn(8, 1)
    for step in range(1, 1001):
        x = torch.randn(32, 8)
        loss = torch.nn.functional.mse_loss(model(x), x @ w)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        if step % 10 == 0:
            print(f"step {step}/1000 | loss {loss.item():.4f} | lr {sched.get_last_lr()[0]:.3e}", flush=True)
"""


def test_a_learning_rate_at_zero_is_cited_from_where_it_reached_zero(tmp_path):
    """The tenth user trial's case04 (a decay set to one epoch of a 10,000-step run) was cited 'at each of the last 3
    logs from step 9998': the onset and the share of the run are what a reader needs (issue 13, behaviour 8)."""
    log = run_script(tmp_path, SHORT_SCHEDULE, check=True)
    d = diagnose(DiagnoseRequest(target=str(log)))
    lr = next(a for a in d.anomalies if a.kind.value == "learning-rate-zero")
    assert lr.step == 50 and "from step 50" in lr.detail and "95% of the run's 1000 steps" in lr.detail, lr.detail
