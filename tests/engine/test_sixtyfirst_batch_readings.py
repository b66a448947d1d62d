"""Batches 61-62's misses read as general behaviours (scored at 3fd7107 before any change):

- TensorFlow's collective ops report an NCCL failure as 'INTERNAL:  NCCL: unhandled system error' (2087 abstained): the
  reason NCCL's own error string gives, after 'NCCL:', names an NCCL failure like XLA's 'failed: <reason>'.
- A boosted model whose training AUC is 0.500000 at every round from the first never changed its predictions (2089
  read running): the training metric frozen from the start, with no loss printed, is a run that learns nothing.
- A completion message the log trains past is not the run's end (0915: a 50-epoch run's 'Training complete.', then a
  500-epoch run appended to the same log that stops at its epoch 53, read completed).

The cases are verbatim public logs (they fail on 3fd7107); the runs are real: XGBoost on the CPU whose trees can find
no split, and its control that learns; two PyTorch runs appended to one log, the second SIGKILLed, and the control where
only evaluation follows the message. The TF wording is a catalog example (tests/catalog checks every example)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.batchcase import case, run_script, verdict

_BOOST = """
    import sys
    import numpy as np
    import xgboost as xgb
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 10)); y = (x[:, 0] + rng.normal(scale=0.5, size=2000) > 0).astype(int)
    dtrain = xgb.DMatrix(x, label=y)
    params = {"objective": "binary:logistic", "eval_metric": "auc", "max_depth": 3, "eta": 0.3}
    if sys.argv[1] == "nosplit":
        params["min_child_weight"] = 1e9  # no leaf can hold that much hessian: every tree is a single leaf
    xgb.train(params, dtrain, num_boost_round=15, evals=[(dtrain, "train")], verbose_eval=1)
"""

_TWO_RUNS = """
    import sys, torch
    torch.manual_seed(0)
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    def run(epochs, kill_at=None):
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        print(f"Batch: 2, LR: 0.01, Epochs: {epochs}", flush=True)
        for epoch in range(1, epochs + 1):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            print(f"Epoch: {epoch:02d} | Epoch Time: 0m 1s", flush=True)
            print(f"\\tTrain Loss: {loss.item():.3f}", flush=True)
            print(f"\\t Val. Loss: {loss.item() + 0.03:.3f}", flush=True)
            if epoch == kill_at:
                import os, signal
                os.kill(os.getpid(), signal.SIGKILL)
        print(f"Training complete. Best val loss: {loss.item():.4f}", flush=True)
    run(5)
    if sys.argv[1] == "second":
        run(500, kill_at=12)
    else:
        print("Test Loss: 0.91", flush=True)
"""


def test_tensorflows_nccl_reason_is_an_nccl_failure():
    assert verdict(case("2087")) == ("nccl-distributed", "crashed")


def test_a_training_auc_frozen_from_the_first_round_is_a_run_that_learns_nothing(tmp_path: Path):
    pytest.importorskip("xgboost")
    log = run_script(tmp_path, _BOOST, "nosplit", check=True)
    assert log.read_text().count("train-auc:0.50000") == 15
    assert verdict(log) == ("optimization-divergence", "degraded")
    assert verdict(case("2089"))[0] == "optimization-divergence"


def test_a_boosted_model_that_learns_is_no_failure(tmp_path: Path):
    pytest.importorskip("xgboost")
    log = run_script(tmp_path, _BOOST, "learns", check=True)
    assert "train-auc:0.5\t" not in log.read_text()
    assert verdict(log)[0] is None


def test_a_completion_message_the_log_trains_past_is_not_the_runs_end(tmp_path: Path):
    log = run_script(tmp_path, _TWO_RUNS, "second")
    text = log.read_text()
    assert text.count("Training complete.") == 1 and text.rstrip().endswith("Val. Loss: " + text.rsplit("Val. Loss: ", 1)[1].strip())
    assert verdict(log)[1] != "completed"
    assert verdict(case("0915", "healthy"))[1] == "running"


def test_a_completion_message_followed_by_evaluation_only_is_still_the_end(tmp_path: Path):
    log = run_script(tmp_path, _TWO_RUNS, "one")
    assert log.read_text().rstrip().endswith("Test Loss: 0.91")
    assert verdict(log)[1] == "completed"
