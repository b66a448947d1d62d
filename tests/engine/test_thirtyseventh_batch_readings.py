"""Batch 37's healthy status miss, read as a general behaviour (docs/accuracy.md, batch 37; scored at a898302):

an Ultralytics (YOLOv5/v8) results row names its epoch out of the run's total in its first column ('    100/100      3.38G
2.293 ...'), with no word 'epoch' on it: the row of the last epoch, its bar full, then the final validation, is a run
that completed (healthy 723). The same log cut after its 99th epoch (a capture read while the run was alive) is not.

Ultralytics does not run here: the public W&B capture stands for the shape; the cut is one contiguous slice of it."""

from __future__ import annotations

from tests.engine.batchcase import case, verdict


def test_an_ultralytics_run_at_its_last_epoch_row_then_its_final_validation_completed(tmp_path):
    log = case("723", "healthy")
    assert verdict(log) == (None, "completed")
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    last = max(i for i, x in enumerate(lines) if x.lstrip().startswith("99/100"))
    cut = tmp_path / "train.log"
    cut.write_text("".join(lines[: last + 4]), encoding="utf-8")  # the 99th epoch's row and its validation
    assert verdict(cut)[1] != "completed"
