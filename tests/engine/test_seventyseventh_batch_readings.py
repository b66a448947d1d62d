"""Batches 77-78's misses read as general behaviours (scored at 4cfbcc6 before any change):

- GPT-NeoX's overflow monitor ending the run ('Exception: Skipped 50 iterations in a row due to Overflow - Exiting
  training.') is fp16 loss scaling run out of room, as DeepSpeed's 'Current loss scale already at minimum' is: 2193 read
  config-error at 0.74 from the bare Exception (a verbatim public report; the signature's examples are checked by
  tests/catalog/test_signatures.py);
- a loop's own stop at its configured total ('Reached max steps (200000). Stopping training.') is the run's end (0985,
  read running).

The completion run is a real PyTorch loop, with a control cut before its total."""

from __future__ import annotations

from pathlib import Path

from tests.engine.batchcase import case, run_script, verdict


def test_neox_overflow_monitors_exit_is_fp16_loss_scaling_out_of_room():
    assert verdict(case("2193")) == ("nan-inf", "crashed")


_MAX_STEPS = """
    import logging, sys, torch
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(message)s", level=logging.INFO, stream=sys.stdout)
    log = logging.getLogger()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    max_steps, stop, step = 400, int(sys.argv[1]), 0
    for epoch in range(1, 1000):
        for _ in range(50):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            step += 1
        log.info(f"Epoch {epoch} completed | train_loss={loss.item():.4f} | global_step={step}")
        log.info("Running validation...")
        log.info(f"Validation done | val_loss={loss.item() * 1.1:.4f}")
        if step >= max_steps:
            log.info(f"Reached max steps ({max_steps}). Stopping training.")
            break
        if step >= stop:
            break
"""


def test_a_loops_stop_at_its_max_steps_is_the_runs_end(tmp_path: Path):
    log = run_script(tmp_path, _MAX_STEPS, "9999")
    assert log.read_text().splitlines()[-1].endswith("Reached max steps (400). Stopping training.")
    assert verdict(log) == (None, "completed")
    assert verdict(case("0985", "healthy")) == (None, "completed")


def test_a_loop_cut_before_its_max_steps_has_not_ended(tmp_path: Path):
    log = run_script(tmp_path, _MAX_STEPS, "200")
    assert "Reached max steps" not in log.read_text()
    assert verdict(log)[1] != "completed"
