"""Batch 46's misses, read as general behaviours (docs/accuracy.md, batch 46; scored at de11faa before any change):

- a Ray job whose trial or actor never gets its resources ends on Tune's DEBUG 'Trial X: Status PENDING unchanged.' or
  on Ray's 'The actor or task with ID ... cannot be scheduled right now' warning: it waits there, as a log ending on a
  status table whose every trial is PENDING does (1913, 1797 abstained);
- an epoch header that was printed before the loop's records, printed again after the last record and its evaluation,
  is the next epoch beginning, not a script wrapping up (healthy 795, a run at epoch 69 of 80, read as completed).

1913 and 1797 are verbatim public logs; the epoch loop is a real process read while it runs."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.engine.batchcase import case, verdict


def test_a_tune_trial_whose_status_stays_pending_is_stalled():
    assert verdict(case("1913")) == ("stalled", "hung")


def test_ray_saying_an_actor_cannot_be_scheduled_at_the_end_is_stalled():
    assert verdict(case("1797")) == ("stalled", "hung")


_EPOCHS = """
import time
best = 0.0
for epoch in range(1, 81):
    print(f"[INFO] ===========> Epoch: {epoch}, LR: 0.0001, Previous best: {best:.2f}", flush=True)
    if epoch == 2:
        time.sleep(120)  # the log is read here, while the second epoch runs
    for it in range(0, 2000, 400):
        print(f"[INFO] Iters: {it}, Total loss: {0.05 - epoch * 0.001 + it * 1e-7:.4f}, Mask: 0.87{it % 7}", flush=True)
    miou = 70 + epoch * 0.5
    print(f"[INFO] ***** Evaluation ***** >>>> meanIOU: {miou:.2f}", flush=True)
    best = max(best, miou)
"""


def test_the_next_epochs_header_after_an_evaluation_is_a_run_going_on_not_one_that_completed(tmp_path: Path):
    (tmp_path / "train.py").write_text(_EPOCHS)
    log = tmp_path / "train.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "train.py"], stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while "Epoch: 2," not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "Epoch: 2," in log.read_text()
        assert verdict(log) == (None, "running")
    finally:
        proc.kill()
        proc.wait()
