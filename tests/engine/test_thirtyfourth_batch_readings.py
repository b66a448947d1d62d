"""Batch 34's misses, read as general behaviours (docs/accuracy.md, batch 34):

- a non-finite value printed zero-padded (Python's '{:07.3f}' of NaN is '0000nan') or with a '.0' ('nan.0') is the NaN it
  is, never the padding's 0 (1634, 1643);
- the training and the held-out accuracy both unchanged log after log while the loss moves: the predictions no longer
  depend on the input (1609, 1646);
- a learning rate announced as set to a value ('Updating learning rate to 1.68e-24') is read, and one below 1e-10 is 0
  (1637: a schedule halving the rate every epoch);
- TF's distributed runtime losing a peer ('Cleanup partition error: Unavailable:', 'RPC failed with status =
  "Unavailable: Socket closed"'), a TPU that halted, 'NaN loss with <term>', an RL evaluation's 'Reward: mean=nan', and a
  TimeoutException raised in the optimizer step of a parallel run (1621, 1622, 1630, 1642, 1638, 1623);
- matcher.line_safe closes a character class that ends in an escaped '[' (found writing the reward line's pattern).

Real runs where the shape runs here (PyTorch on the CPU); the public logs themselves where it cannot (TPUs, TF clusters)."""

from __future__ import annotations

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.engine.batchcase import case, run_script, verdict

pytestmark = pytest.mark.slow  # real training scripts in child processes

PADDED_NAN = """
    import sys, torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 8)
    y = x.sum(1, keepdim=True)
    for step in range(1, 41):
        if step == 28 and sys.argv[1] == "corrupt":
            x[3, 5] = float("nan")  # a sample whose feature is NaN reaches the batch
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 5 == 0:
            print(f"Step {step:7d} ({step / 1.7:5.2f}%): loss = {loss.item():07.3f} EER={0.0:.5f}", flush=True)
            if loss.item() != loss.item():
                break  # the script stops at its first NaN: one padded 'nan' line ends the log
"""


def test_a_zero_padded_nan_is_the_nan_it_is(tmp_path):
    """A real regression that a NaN sample reaches at step 28: Python pads the NaN it prints ('0000nan'), which was read as
    a loss of 0 and the run as going on. The same run with clean samples prints the same shape with numbers, and is
    healthy."""
    log = run_script(tmp_path, PADDED_NAN, "corrupt", check=True)
    assert "0000nan" in log.read_text()
    assert verdict(log) == ("nan-inf", "diverged")
    (tmp_path / "ok").mkdir()
    healthy = run_script(tmp_path / "ok", PADDED_NAN, "clean", check=True)
    assert "nan" not in healthy.read_text()
    assert verdict(healthy)[0] is None


def test_a_lightning_postfix_of_nan_point_zero_is_nan_public_log():
    assert verdict(case("1643")) == ("nan-inf", "diverged")  # EveryVoice's 'training/pitch_loss=nan.0' from step 2
    assert verdict(case("1634")) == ("nan-inf", "diverged")  # TF MultiWorker's 'loss = 0000nan' at step 80


CONSTANT_PREDICTOR = """
    import sys, torch
    torch.manual_seed(0)
    n, classes = 600, 4
    y = torch.multinomial(torch.tensor([0.45, 0.25, 0.2, 0.1]), n, replacement=True)
    x = torch.randn(n, 16) + torch.nn.functional.one_hot(y, classes).float().repeat(1, 4) * float(sys.argv[1])
    if sys.argv[2] == "lost":
        x = torch.zeros_like(x)  # the features never reach the model: a pipeline that zeroes its input
    xt, yt, xv, yv = x[:480], y[:480], x[480:], y[480:]
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, classes))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(1, 9):
        for i in range(0, 480, 60):
            loss = torch.nn.functional.cross_entropy(model(xt[i:i + 60]), yt[i:i + 60])
            opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            tl = torch.nn.functional.cross_entropy(model(xt), yt).item()
            acc = (model(xt).argmax(1) == yt).float().mean().item()
            vl = torch.nn.functional.cross_entropy(model(xv), yv).item()
            vacc = (model(xv).argmax(1) == yv).float().mean().item()
        print(f"Epoch: {epoch:04d} train_loss= {tl:.5f} train_acc= {acc:.5f} val_loss= {vl:.5f} val_acc= {vacc:.5f}", flush=True)
"""


def test_both_accuracies_still_while_the_loss_moves_is_a_constant_predictor(tmp_path):
    """A real classifier whose input is zeroed answers the majority class for every sample: both accuracies sit at the
    class shares epoch after epoch while its loss keeps moving toward the prior's entropy. The same model on informative
    features learns, and is read as healthy."""
    lost = run_script(tmp_path, CONSTANT_PREDICTOR, "1.0", "lost", check=True)
    rows = [line for line in lost.read_text().splitlines() if line.startswith("Epoch:")]
    assert len({line.split("train_acc=")[1].split()[0] for line in rows[-4:]}) == 1  # the shape: one accuracy, moving losses
    assert len({line.split("train_loss=")[1].split()[0] for line in rows[-4:]}) == 4
    d = diagnose(DiagnoseRequest(target=str(lost)))
    assert d.primary_cause is not None and d.primary_cause.value == "optimization-divergence"
    assert "predictions no longer change" in " ".join(e.text for e in d.evidence)
    (tmp_path / "ok").mkdir()
    learns = run_script(tmp_path / "ok", CONSTANT_PREDICTOR, "1.0", "kept", check=True)
    assert verdict(learns)[0] is None


def test_both_accuracies_still_public_logs():
    assert verdict(case("1609")) == ("optimization-divergence", "degraded")  # Keras: the majority's 98/220
    assert verdict(case("1646")) == ("optimization-divergence", "degraded")  # GCN: 0.62857 and 0.51 for ten epochs


HALVING = """
    import torch
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    for epoch in range(1, 91):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"Epoch: {epoch}, Steps: 1 | Train Loss: {loss.item():.7f} Vali Loss: {loss.item() * 1.1:.7f}")
        lr = 1e-3 * 0.5 ** epoch
        for g in opt.param_groups:
            g["lr"] = lr
        print(f"Updating learning rate to {lr}")
"""


def test_a_rate_halved_every_epoch_reaches_zero(tmp_path):
    """Time-Series-Library's 'type1' schedule, really run: after ninety epochs the rate is 8e-31 and nothing trains."""
    log = run_script(tmp_path, HALVING, check=True)
    assert "Updating learning rate to 8.077935669463161e-31" in log.read_text()
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "config-error"
    assert any("effectively 0" in e.text for e in d.evidence)


def test_the_public_halving_schedule():
    assert verdict(case("1637")) == ("config-error", "degraded")


def test_distributed_runtime_and_device_failures_public_logs():
    assert verdict(case("1621")) == ("nccl-distributed", "crashed")  # TF PS on YARN: 'Cleanup partition error: Unavailable'
    assert verdict(case("1622")) == ("nccl-distributed", "crashed")  # torch_xla: 'RPC failed ... Unavailable: Socket closed'
    assert verdict(case("1630")) == ("cuda-runtime", "crashed")  # 'Accelerator device halted prematurely'
    assert verdict(case("1623"))[0] == "nccl-distributed"  # OneFlow's TimeoutException in SGD's step after a peer died
    assert verdict(case("1642")) == ("nan-inf", "crashed")  # Coqui's 'NaN loss with decoder_loss', glued to a frame
    assert verdict(case("1638")) == ("nan-inf", "diverged")  # FPO's 'Reward: mean=nan' at every evaluation


HILL_CLIMBING = """
    import random
    random.seed(3)
    w, best, noise, scores = 0.0, -1e9, 0.5, []
    for episode in range(1, 2001):
        cand = w + random.gauss(0, noise)
        ret = 1000.0 - 400.0 * abs(cand - 2.0) + random.gauss(0, 5)  # a one-parameter policy's episode return
        if ret >= best:
            w, best, noise = cand, ret, max(noise / 2, 0.01)
        scores.append(ret)
        avg = sum(scores[-100:]) / len(scores[-100:])
        if episode % 10 == 0:
            print(f"Episode {episode:5d}\\tAvg: {avg:7.2f}\\tBestRet: {best:7.2f}\\tNoise: {noise:.4f}")
        if len(scores) >= 100 and avg >= 990.0:
            print(f"\\nEnvironment solved in {episode - 100:d} episodes!\\tAverage Score: {avg:.3f}")
            break
"""


def test_an_rl_loop_that_reached_its_target_completed(tmp_path):
    """The Udacity DRL projects' closing line ('Environment solved in N episodes!'), printed when the loop breaks on its
    target score, is the run's planned end (healthy 706 was read as unknown)."""
    log = run_script(tmp_path, HILL_CLIMBING, check=True)
    assert "Environment solved in" in log.read_text()
    assert verdict(log) == (None, "completed")
    assert verdict(case("706", "healthy")) == (None, "completed")
