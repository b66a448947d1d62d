"""Batch 38's miss, read as a general behaviour (docs/accuracy.md, batch 38; scored at 7835976 before any change):

DeepSpeed's fp16 optimizer prints 'step=N, skipped=M' every steps_per_print; M equal to N past the first few dozen steps
is every step overflowing, so the weights never changed (1694, a reward model whose printed loss looks ordinary): nan-inf,
and the plan's first fix is precision. The same log cut at 'step=10, skipped=10' is a loss scale still calibrating.

DeepSpeed's fp16 optimizer does not run on this machine's CPU: the public W&B capture stands for the shape; the cut is one
contiguous slice of it."""

from __future__ import annotations

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

from tests.engine.batchcase import case, verdict


def test_every_fp16_step_skipped_is_nan_inf_and_a_calibrating_loss_scale_is_not(tmp_path):
    log = case("1694")
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "nan-inf"
    assert d.fixes[0].fix_id == "bf16-or-loss-scaling", [f.fix_id for f in d.fixes]
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    first = next(i for i, x in enumerate(lines) if "step=10, skipped=10" in x)
    cut = tmp_path / "train.log"
    cut.write_text("".join(lines[: first + 3]), encoding="utf-8")
    assert verdict(cut)[0] != "nan-inf"
