"""XGBoost's evaluation lines ('[500]\teval-logloss:0.41906\ttrain-logloss:0.160439'): the training set's loss and a
held-out set's, by the names XGBoost gives the watched sets. Batch 19's 1257 (early_stopping_rounds watching the
training set, the last one in evals, so it never fires while the held-out loss climbs for 12,000 rounds) was read as
no failure: the metric names were not losses to the engine. Real XGBoost runs on the CPU."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

pytest.importorskip("xgboost")

SCRIPT = """
import sys
import numpy as np
import xgboost as xgb
rng = np.random.default_rng(0)
x = rng.normal(size=(2000, 20)); y = (x[:, 0] + x[:, 1] + rng.normal(scale=1.0, size=2000) > 0).astype(int)
dtrain, dtest = xgb.DMatrix(x[:1000], label=y[:1000]), xgb.DMatrix(x[1000:], label=y[1000:])
watch_last = sys.argv[1]  # early stopping watches the last set in evals
evals = [(dtest, "eval"), (dtrain, "train")] if watch_last == "train" else [(dtrain, "train"), (dtest, "eval")]
params = {"objective": "binary:logistic", "eta": 0.05, "max_depth": 4, "eval_metric": "logloss"}
xgb.train(params, dtrain, num_boost_round=2000, evals=evals, early_stopping_rounds=50, verbose_eval=10)
"""


def _run(tmp_path: Path, watch_last: str) -> Path:
    log = tmp_path / "train.log"
    with log.open("wb") as out:
        subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT), watch_last], stdout=out, stderr=subprocess.STDOUT,
                       timeout=300, check=True)
    return log


def test_early_stopping_on_the_training_set_lets_the_held_out_loss_climb_and_that_is_memorisation(tmp_path: Path) -> None:
    log = _run(tmp_path, "train")
    lines = [x for x in log.read_text().splitlines() if "eval-logloss" in x]
    assert len(lines) > 150  # early stopping never fired: the training loss keeps improving
    held = [float(x.split("eval-logloss:")[1].split()[0]) for x in lines]
    assert held[-1] > 1.5 * min(held)
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is not None and d.primary_cause.value == "evaluation-mismatch", d.root_cause
    assert "validation loss climbed" in d.root_cause.proximate


def test_early_stopping_on_the_held_out_set_stops_before_it_climbs_and_is_no_failure(tmp_path: Path) -> None:
    log = _run(tmp_path, "eval")
    assert sum("eval-logloss" in x for x in log.read_text().splitlines()) < 30  # it stopped early, as meant
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.primary_cause is None, d.root_cause
