"""Batch 29's misses, read generally (each on a real run here where the shape runs on a CPU, and on the public log that
showed it): a loss scale that collapsed (NVIDIA's DLLogger 1498, icefall's 'Grad scale is small' 1499), a bare
'step value' log going nan (1497), training and held-out losses pinned at ln C in a log whose epochs are on lines of
their own (1496), a loss frozen over lines that print no counter (healthy 643), a 'Vali' evaluation label (healthy 639)
and a REST error body's 429 (1494)."""

from __future__ import annotations

from pathlib import Path

from tests.engine.batchcase import case, run_script, verdict

SCALER = """
import time
import torch
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu")
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(1, 61):
    loss = torch.nn.functional.mse_loss(model(x), y) * 3e38  # a term on the wrong scale: its scaled gradient overflows
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print(f"DLL {time.strftime('%Y-%m-%d %H:%M:%S')}.000000 - PARAMETER loss_scale : {scaler.get_scale()} ", flush=True)
"""


def test_a_grad_scaler_halving_at_every_step_is_every_gradient_overflowing(tmp_path: Path):
    log = run_script(tmp_path, SCALER, check=True)
    assert "e-13" in log.read_text()  # the scaler really halved below 1e-5
    assert verdict(log)[0] == "nan-inf"


def test_a_logged_loss_scale_of_65536_is_routine(tmp_path: Path):
    log = run_script(tmp_path, SCALER.replace("* 3e38", "* 1.0"), check=True)
    assert verdict(log)[0] is None


def test_loss_scale_collapse_public_logs():
    assert verdict(case("1498"))[0] == "nan-inf"  # DLLogger's loss_scale 3.7e-09 down to 5.7e-14
    assert verdict(case("1499"))[0] == "nan-inf"  # icefall's 'Grad scale is small: 1.29e-26', then its waiting stack


def test_a_print_step_loss_log_going_nan(tmp_path: Path):
    log = run_script(tmp_path, """
        import torch
        torch.manual_seed(0)
        w = torch.randn(16, requires_grad=True)
        x = torch.randn(256, 16)
        for step in range(10, 400, 10):
            loss = ((x @ w) ** 2).mean()
            loss.backward()
            with torch.no_grad():
                w -= (30.0 if step > 200 else 0.001) * w.grad  # the step size jumps
                w.grad.zero_()
            print(step, loss.item(), flush=True)
        """, check=True)
    assert "\n310 inf\n" in log.read_text() or " nan\n" in log.read_text()
    assert verdict(log)[0] == "nan-inf"
    assert verdict(case("1497"))[0] == "nan-inf"


CHANCE = """
import torch
torch.manual_seed(0)
x, y = torch.randn(2000, 32), torch.randint(0, 100, (2000,))  # labels the inputs say nothing about
vx, vy = torch.randn(500, 32), torch.randint(0, 100, (500,))
model = torch.nn.Linear(32, 100)
opt = torch.optim.SGD(model.parameters(), lr=0.5, weight_decay=WD)
for epoch in range(1, 13):
    print(f"========   epoch {epoch:3d} (lr: 0.5)  ========", flush=True)
    for i in range(0, 2000, 500):
        loss = torch.nn.functional.cross_entropy(model(x[i:i + 500]), y[i:i + 500])
        opt.zero_grad(); loss.backward(); opt.step()
    with torch.no_grad():
        err = (model(x).argmax(1) != y).float().mean().item() * 100
        vl = torch.nn.functional.cross_entropy(model(vx), vy).item()
    print(f"train loss = {loss.item():.5f} | train err = {err:.2f}% |", flush=True)
    print(f"test loss = {vl:.5f} | test err = 99.00%", flush=True)
"""


def test_training_and_held_out_losses_pinned_at_ln_c_with_epochs_on_their_own_lines(tmp_path: Path):
    log = run_script(tmp_path, CHANCE.replace("WD", "2.0"), check=True)
    assert "train loss = 4.60" in log.read_text()  # really at ln 100
    assert verdict(log)[0] == "optimization-divergence"
    assert verdict(case("1496"))[0] == "optimization-divergence"


def test_a_classifier_that_learns_is_not_pinned(tmp_path: Path):
    code = CHANCE.replace("WD", "0.0").replace("torch.randint(0, 100, (2000,))", "torch.randn(2000, 32)[:, :4].argmax(1)")
    code = code.replace("vy = torch.randn(500, 32), torch.randint(0, 100, (500,))", "vy = torch.randn(500, 32), torch.zeros(500, dtype=torch.long)")
    log = run_script(tmp_path, code, check=True)
    assert verdict(log)[0] is None


def test_a_loss_frozen_over_lines_that_print_no_counter_public_log():
    assert verdict(case("643", "healthy")) == ("optimization-divergence", "degraded")  # 6.907 = ln 1000 for two epochs


def test_vali_set_results_are_the_validation_not_a_training_blowup_public_log():
    assert verdict(case("639", "healthy")) == (None, "completed")


def test_a_rest_error_body_429_is_a_rate_limit_public_log():
    assert verdict(case("1494"))[0] == "cloud-permissions-quota"


def test_teardown_noise_before_the_launchers_last_worker_exits_successfully_public_log():
    # a 2-node Megatron-DeepSpeed run at iteration 20 of 20: TCPStore broken pipes while the store's host exits first,
    # then the DeepSpeed launcher's 'Process N exits successfully' for all 16 workers (healthy 652)
    assert verdict(case("652", "healthy")) == (None, "completed")
