"""Batch 58's healthy miss read as a general behaviour (docs/accuracy.md, batch 58, scored at 05987b0 before any change):
a run that closes with a summary block of `final_<split>_<metric>:` keys ('final_test_acc:   95.92%', autoresearch-style
training scripts) has returned from its loop (0894 read unknown).

The case is a verbatim committed log (it fails on 05987b0); the run is real: a PyTorch loop on the CPU printing such a
block, and the same loop killed before it (the control)."""

from __future__ import annotations

from pathlib import Path

from tests.engine.batchcase import case, run_script, verdict

_LOOP = """
    import sys, torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(256, 8), torch.randint(0, 2, (256,))
    for epoch in range(6):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        acc = (model(x).argmax(1) == y).float().mean().item()
        print(f"  eval ep {epoch:3d} | test_loss: {loss.item():.4f} | test_acc: {100 * acc:.2f}%", flush=True)
        if epoch == 3 and sys.argv[1] == "killed":
            import os, signal
            os.kill(os.getpid(), signal.SIGKILL)
    print("---")
    print(f"final_test_acc:   {100 * acc:.2f}%")
    print(f"final_test_loss:  {loss.item():.4f}")
    print("num_epochs:       6")
"""


def test_a_closing_block_of_final_metric_keys_is_a_completed_run(tmp_path: Path):
    log = run_script(tmp_path, _LOOP, "done")
    assert "final_test_acc:" in log.read_text()
    assert verdict(log) == (None, "completed")
    assert verdict(case("0894", "healthy"))[1] == "completed"


def test_the_same_loop_killed_before_its_block_is_not_completed(tmp_path: Path):
    log = run_script(tmp_path, _LOOP, "killed")
    assert "final_test_acc" not in log.read_text()
    assert verdict(log)[1] != "completed"
