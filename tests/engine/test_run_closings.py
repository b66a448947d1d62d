"""How a run that did not fail is read as over: a loop's last record followed by a few lines printed once, one of
them a closing ('Model saved to ...', 'Done!'; engine/analyse/routine.closed_after_routine); XGBoost's early stop at
its best round and the SageMaker toolkit's 'Reporting training SUCCESS' (read/scan.py's markers). And a loss with no
floor: an NLL on raw scores that falls ~10 per epoch below zero is no learning (analyse/divergence.loss_unbounded,
batch 25's 1397). Real runs throughout; controls must not change."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.batchcase import run_script, verdict

TESTS = Path(__file__).resolve().parents[1]


# a Q-learning loop with its own record shape, then what the script prints once the loop has returned
_QLEARN = """
    import pickle, random, sys
    random.seed(0)
    q = [[0.0, 0.0] for _ in range(8)]
    for cycle in range(1, 41):
        wins, utility = 0, 0.0
        for _ in range(50):
            s = random.randrange(8); a = max((0, 1), key=lambda k: q[s][k] + random.random() * 0.1)
            r = 1.0 if (s + a) % 3 == 0 else -0.2
            q[s][a] += 0.1 * (r - q[s][a]); utility += r; wins += r > 0
        print(f"after cycle={cycle} avg(utility)={utility / 50!r} avg(num_wins)={wins / 50}", flush=True)
    if sys.argv[1] == "closes":
        with open("q.pkl", "wb") as f:
            pickle.dump(q, f)
        print("Q-table saved to q.pkl", flush=True)
        print("Done!", flush=True)
    elif sys.argv[1] == "periodic":
        print("Saving checkpoint to ckpt/cycle_40.pt with optimizer state", flush=True)
"""


def test_a_loop_then_a_save_and_done_printed_once_is_a_completed_run(tmp_path: Path):
    assert verdict(run_script(tmp_path, _QLEARN, "closes")) == (None, "completed")


@pytest.mark.parametrize(("how", "status"), [("periodic", "running"), ("cut", "running")])
def test_a_periodic_checkpoint_or_nothing_after_the_loop_is_no_end(tmp_path: Path, how: str, status: str):
    assert verdict(run_script(tmp_path, _QLEARN, how)) == (None, status)


def test_xgboost_stopping_at_its_best_iteration_is_its_end():
    """Verbatim paste (tests/healthy/569-*/case.json cites it): xgboost 3 no longer prints the line, so no run here can."""
    log = next((TESTS / "healthy").glob("569-*")) / "train.log"
    assert "Stopping. Best iteration:" in log.read_text()
    assert verdict(log) == (None, "completed")


# an NLL fed a linear layer's raw outputs: nothing bounds it below, so SGD drives it down ~linearly for ever
_NLL = """
    import sys, torch
    torch.manual_seed(0)
    x = torch.randn(256, 10); y = torch.randint(0, 3, (256,))
    model = torch.nn.Linear(10, 3)
    opt = torch.optim.SGD(model.parameters(), lr=8.0)
    raw = sys.argv[1] == "raw"
    for epoch in range(1, 9):
        out = model(x)
        loss = torch.nn.functional.nll_loss(out if raw else torch.log_softmax(out, 1), y)
        opt.zero_grad(); loss.backward(); opt.step()
        acc = (out.argmax(1) == y).float().mean().item()
        print(f"Train Epoch: {epoch} [0/256 (0%)]\\tLoss: {loss.item():.6f}\\tAccuracy: {acc:.3f}", flush=True)
    print("Training complete in 0m 1s", flush=True)
"""


def test_an_nll_on_raw_scores_falling_without_floor_is_divergence(tmp_path: Path):
    log = run_script(tmp_path, _NLL, "raw")
    assert verdict(log) == ("optimization-divergence", "diverged")  # as tests/lab reads a finite blow-up that ran on


def test_the_same_loop_on_log_probabilities_is_healthy(tmp_path: Path):
    assert verdict(run_script(tmp_path, _NLL, "logsoftmax")) == (None, "completed")


def test_sagemaker_reporting_training_success_after_an_unbounded_loss():
    """Verbatim CloudWatch export (tests/corpus/1397-*/case.json cites it): '#011' escapes the tab."""
    log = next((TESTS / "corpus").glob("1397-*")) / "train.log"
    assert verdict(log)[0] == "optimization-divergence"
