"""A loop's own counter with no name, bracketed at the start of each line ('[079/100] D: 0.5125 | G: 1.2052'), that
reaches its total and is closed by a line the loop never printed ('Inception Score: 2.179 | FID: 20.17') is a completed
run: healthy 685 read running (written after reading that case, so it is a regression test, not evidence).

The runs are real: a PyTorch loop on the CPU printing such rows then a summary; the same loop killed before its last
row (the control); and a batch counter that reaches its total at the end of every epoch, then that epoch's own line,
cut after one epoch (the second control: a per-epoch total is not the run's)."""

from __future__ import annotations

from pathlib import Path

from tests.engine.batchcase import case, run_script, verdict

_LOOP = """
    import sys, torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(256, 8), torch.randint(0, 2, (256,))
    for epoch in range(1, 21):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"[{epoch:03d}/020] D: {loss.item():.4f} | G: {1 + loss.item():.4f} | lr={0.1 / epoch:.6f} ", flush=True)
        if epoch == 12 and sys.argv[1] == "killed":
            import os, signal
            os.kill(os.getpid(), signal.SIGKILL)
    acc = (model(x).argmax(1) == y).float().mean().item()
    print()
    print(f"Test accuracy: {acc:.3f} | test loss: {loss.item():.4f}")
"""

_EPOCHS = """
    import sys, torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(256, 8), torch.randint(0, 2, (256,))
    for epoch in range(1, 4):
        for batch in range(1, 11):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            print(f"[{batch:02d}/10] loss: {loss.item():.4f}", flush=True)
        print(f"Epoch {epoch} mean loss: {loss.item():.4f}", flush=True)
        if epoch == 1 and sys.argv[1] == "killed":
            import os, signal
            os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_unnamed_counter_at_its_total_closed_by_a_summary_is_a_completed_run(tmp_path: Path):
    log = run_script(tmp_path, _LOOP, "done")
    assert "[020/020]" in log.read_text()
    assert verdict(log) == (None, "completed")
    assert verdict(case("685", "healthy"))[1] == "completed"


def test_the_same_loop_killed_before_its_last_row_is_not_completed(tmp_path: Path):
    log = run_script(tmp_path, _LOOP, "killed")
    assert "[012/020]" in log.read_text() and "[013/020]" not in log.read_text()
    assert verdict(log)[1] != "completed"


def test_a_batch_counter_at_the_end_of_one_epoch_is_not_the_runs_end(tmp_path: Path):
    log = run_script(tmp_path, _EPOCHS, "killed")
    text = log.read_text()
    assert "[10/10]" in text and text.rstrip().splitlines()[-1].startswith("Epoch 1 mean loss")
    assert verdict(log)[1] != "completed"
