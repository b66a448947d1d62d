"""Batch 65's wrong verdict read as a general behaviour (scored at ed525ec before any change): an evaluation loss of nan
beside a training loss printed as exactly 0.0 at every log is not 'the evaluation computes nan while training stays
finite' (2113 read evaluation-mismatch at 0.97). A trainer that drops non-finite losses from its running mean (the HF
Trainer's logging_nan_inf_filter) prints 0.0 when every step's loss was non-finite; the evaluation's nan is the same
fault, unmasked.

The runs are real: a PyTorch loop whose every label is the ignore index (a mean over no label: nan), its logger
filtering non-finite losses as the HF Trainer does, and its evaluation printing nan; the control, a loop that trains
(its loss moves) while its evaluation divides by an empty validation set, stays an evaluation problem."""

from __future__ import annotations

from pathlib import Path

from tests.engine.batchcase import case, run_script, verdict

_LOOP = """
    import math, sys, torch
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 8)
    y = torch.full((64,), -100) if sys.argv[1] == "masked" else torch.randint(0, 4, (64,))
    kept, n = 0.0, 0
    for step in range(1, 61):
        loss = torch.nn.functional.cross_entropy(model(x), y, ignore_index=-100)
        opt.zero_grad(); loss.backward(); opt.step()
        if math.isfinite(loss.item()):  # the logger drops non-finite losses from its running mean
            kept, n = kept + loss.item(), n + 1
        if step % 5 == 0:
            print({"loss": round(kept / n, 4) if n else 0.0, "learning_rate": 0.1, "epoch": round(step / 600, 2)}, flush=True)
            kept, n = 0.0, 0
        if step % 20 == 0:
            if sys.argv[1] == "masked":
                with torch.no_grad():
                    ev = torch.nn.functional.cross_entropy(model(x), y, ignore_index=-100).item()
            else:  # an empty validation set: the mean of no loss
                ev = float("nan")
            print({"eval_loss": ev, "eval_runtime": 0.1, "epoch": round(step / 600, 2)}, flush=True)
"""


def test_an_eval_nan_beside_a_training_loss_of_exactly_zero_throughout_is_a_nan_not_an_evaluation_fault(tmp_path: Path):
    log = run_script(tmp_path, _LOOP, "masked")
    text = log.read_text()
    assert "'loss': 0.0" in text and "'eval_loss': nan" in text and "'loss': 1." not in text
    assert verdict(log)[0] == "nan-inf"
    assert verdict(case("2113"))[0] == "nan-inf"


def test_an_eval_nan_beside_a_training_loss_that_moves_stays_an_evaluation_fault(tmp_path: Path):
    log = run_script(tmp_path, _LOOP, "trains")
    text = log.read_text()
    assert "'eval_loss': nan" in text and "'loss': 0.0" not in text
    assert verdict(log)[0] == "evaluation-mismatch"
