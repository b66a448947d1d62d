"""Batch 36's misses, read as general behaviours (docs/accuracy.md, batch 36; scored at df4306a before any change):

- a C library assert() whose file and function are the data loader's ('llmc/dataloader.h:186: void dataloader_init(...):
  Assertion `shard_ntok >= ...' failed.') is a data failure, as a C++ CHECK in the framework's loader already was (1680);
- a native library's 'Unable to open X for writing' is a failed output write (1685, dlib's serialization_error);
- dlib's CUDA wordings, 'Error while calling cudaMalloc(...) ... reason: out of memory' (1684) and any other 'Error while
  calling cuda...(' (1686), and cuRAND's 'Curand error 203' (1657, Marian);
- the cloud's own notice that it takes a spot VM back ('GCP Metadata Service says termination is imminent', then
  'systemd-logind Power key pressed': 1655);
- a script's closing timer printed once after its last epoch ('INFO:root:Execution time: 1933.9 seconds') ends the run
  (healthy 719), while the same timer printed after every epoch of a cut run does not;
- 'Epoch 1, batch 8500, train_loss[loss=nan' (icefall/k2 recipes: an epoch and its iteration, no per-epoch total) is
  8,500 iterations in: no 'within the first 100 steps' (1681; trial 11's reader A).

dlib, Marian, llm.c and a GCP spot VM do not run here: the public logs stand for those shapes. The timer and the NaN
late in an epoch are real runs."""

from __future__ import annotations

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.engine.batchcase import case, run_script, verdict

pytestmark = pytest.mark.slow  # real scripts in child processes


@pytest.mark.parametrize(("n", "want"), [
    ("1680", ("data-pipeline", "crashed")), ("1685", ("io-checkpoint", "crashed")), ("1684", ("oom", "crashed")),
    ("1686", ("cuda-runtime", "crashed")), ("1657", ("cuda-runtime", "crashed")), ("1655", ("process-crash", "crashed")),
])
def test_native_wordings_of_batch_36_public_logs(n, want):
    assert verdict(case(n)) == want


TIMER = """
    import logging, sys, time
    logging.basicConfig(level=logging.INFO, stream=sys.stdout)
    start, w = time.time(), 5.0
    epochs = int(sys.argv[1])
    for epoch in range(0, epochs + 1, 500):
        w *= 0.9
        logging.info(f"Epoch: {epoch} - Execution time: {time.time() - start + 0.5 * epoch:.4f} seconds")
        if sys.argv[2] == "every":
            logging.info(f"Execution time: {time.time() - start + 0.5 * epoch:.4f} seconds")
    if sys.argv[2] == "once":
        logging.info(f"Execution time: {time.time() - start + 0.5 * epochs:.4f} seconds")
"""


def test_a_closing_timer_printed_once_ends_the_run_and_one_printed_every_epoch_does_not(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert verdict(run_script(tmp_path / "a", TIMER, "3000", "once")) == (None, "completed")
    assert verdict(run_script(tmp_path / "b", TIMER, "3000", "every"))[1] != "completed"


LATE_NAN = """
    import torch
    torch.manual_seed(0)
    m = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(64, 8)
    y = x.sum(1, keepdim=True)
    for epoch in (1,):
        for batch in range(0, 1001):
            xb = x.clone()
            if batch >= 700:
                xb[0, 0] = float("inf")  # a corrupt sample from here on
            loss = torch.nn.functional.mse_loss(m(xb), y)
            opt.zero_grad(); loss.backward(); opt.step()
            if batch % 50 == 0:
                print(f"2023-03-06 12:41:16,653 INFO [train.py:694] Epoch {epoch}, batch {batch}, "
                      f"train_loss[loss={loss.item():.4g}, over 64.00 frames. ]", flush=True)
"""


def test_a_nan_at_batch_700_of_epoch_1_is_not_early(tmp_path):
    pytest.importorskip("torch")
    log = run_script(tmp_path, LATE_NAN)
    d = diagnose(DiagnoseRequest(target=str(log)))
    nan = next(a for a in d.anomalies if a.kind.value == "nan-onset")
    assert "iteration 700" in nan.detail and "first 100 steps" not in nan.detail, nan.detail
    # the public excerpt whose first loss is already nan at 'Epoch 1, batch 8500'
    d = diagnose(DiagnoseRequest(target=str(case("1681"))))
    nan = next(a for a in d.anomalies if a.kind.value == "nan-onset")
    assert "iteration 8500" in nan.detail and "first 100 steps" not in nan.detail, nan.detail


def test_the_closing_timers_words_over_a_run_of_spaces_never_slow_the_cli(tmp_path):
    """Promise 9 (docs/security.md): the timer's pattern first read the spaces after 'time' with two quantifiers, 0.15 s
    a line (a line is read to 4,000 characters): 200 such lines held the CLI 10 s against 2 s for a control log of the
    same size whose lines hold words between the spaces, timed in the same minutes."""
    from tests.security.childcli import cli_seconds, no_slower_than

    steps = "".join(f"epoch {i} loss {1.0 / (i + 1):.4f}\n" for i in range(20))
    hostile = tmp_path / "hostile"
    control = tmp_path / "control"
    hostile.mkdir()
    control.mkdir()
    (hostile / "train.log").write_text(steps + ("INFO:root:Execution time" + " " * 3990 + "x\n") * 200)
    (control / "train.log").write_text(steps + ("INFO:root:Execution time" + " ".join(["x"] * 1995) + "\n") * 200)
    _, base = cli_seconds(control / "train.log", control)
    proc, took = cli_seconds(hostile / "train.log", hostile)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert no_slower_than(took, base), (took, base)
