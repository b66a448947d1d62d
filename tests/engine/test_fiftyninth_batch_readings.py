"""Batches 59-60's healthy miss read as a general behaviour (scored at a04da1e before any change): a loop that logs on
an offset schedule ('step=7', 15, ..., 1207: every 8 steps, when (step + 1) % 8 == 0) and then prints its last step off
it ('step=1210') with the same statement has returned from its loop; what follows is an evaluation, and an INFO line
that says an error was ignored ('Ignoring parse error (tolerant parsing mode)') is not a fatal end (0903 read unknown).

The case is a verbatim committed log (it fails on a04da1e); the runs are real: a PyTorch loop on the CPU with such a
schedule and a closing evaluation, the same loop killed mid-schedule, and one cut right after a save line that names an
off-schedule step (a different statement: not the loop's end)."""

from __future__ import annotations

from pathlib import Path

from tests.engine.batchcase import case, run_script, verdict

_LOOP = """
    import logging, sys, torch
    logging.basicConfig(format="%(name)s - %(levelname)s - %(message)s", level=logging.INFO)
    log = logging.getLogger("__main__")
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(256, 8), torch.randint(0, 2, (256,))
    last = 61
    for step in range(last):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if (step + 1) % 8 == 0 or step == last - 1:
            log.info(f"epoch=0 step={step} loss={loss.item():.6f}")
        if sys.argv[1] == "killed" and step == 40:
            import os, signal
            os.kill(os.getpid(), signal.SIGKILL)
        if sys.argv[1] == "saved" and step == 42:
            log.info(f"saving checkpoint at step={step}")
            import os, signal
            os.kill(os.getpid(), signal.SIGKILL)
    logging.getLogger("utils").info("Loaded 256 test cases")
    logging.getLogger("pylatexenc.latexwalker").info("Ignoring parse error (tolerant parsing mode): Unexpected closing math mode")
    acc = (model(x).argmax(1) == y).float().mean().item()
    logging.getLogger("utils").info(f"Correct: {int(acc * 256)}/256 ({100 * acc:.1f}%)")
"""


def test_a_last_step_printed_off_an_offset_schedule_by_the_same_statement_is_a_completed_run(tmp_path: Path):
    log = run_script(tmp_path, _LOOP, "done")
    assert "step=55 " in log.read_text() and "step=60 " in log.read_text()
    assert verdict(log) == (None, "completed")
    assert verdict(case("0903", "healthy"))[1] == "completed"


def test_the_same_loop_killed_on_its_schedule_is_not_completed(tmp_path: Path):
    log = run_script(tmp_path, _LOOP, "killed")
    assert log.read_text().rstrip().endswith(log.read_text().rstrip().splitlines()[-1]) and "step=39 " in log.read_text()
    assert verdict(log)[1] != "completed"


def test_an_off_schedule_step_in_another_statement_is_not_the_loops_end(tmp_path: Path):
    log = run_script(tmp_path, _LOOP, "saved")
    assert log.read_text().rstrip().endswith("saving checkpoint at step=42")
    assert verdict(log)[1] != "completed"
