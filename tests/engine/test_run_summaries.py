"""What a run prints once about the whole run, and what only looks like it (issue 13, item 5: status).

Healthy 337 (a public llama-recipes report): FSDP fine-tuning at epoch 1 of 10, step 5 of 106, with a flop
counter's table after its 'Total time used in this flop counting step is: 2.6' line; the run is in progress, and a
profiler's total for one step is no summary of the run. Healthy 336 (a public Horovod report): the synthetic
ImageNet benchmark's ten timed iterations, then 'Img/sec per GPU: 108.2 +-1.2' and 'Total img/sec on 4 GPU(s):
432.8 +-4.9', the benchmark's closing total: it completed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def _diagnose(prefix: str):
    return diagnose(DiagnoseRequest(target=str(next((TESTS / "healthy").glob(f"{prefix}-*")) / "train.log")))


def test_a_flop_counters_total_time_is_no_end():
    d = _diagnose("337")
    assert d.run_status.value != "completed"
    assert d.primary_cause is None


def test_a_benchmarks_closing_total_is_its_end():
    d = _diagnose("336")
    assert d.run_status.value == "completed"
    assert d.primary_cause is None


# public logs whose last words are the optimiser's or pipeline's own end of the whole run: Caffe's solver (311, 312),
# the Theano tutorials after epochs whose metric is a 'validation error' (244), LightGBM's CLI (295), a segmentation
# pipeline (333), ColBERT's training loop over all its triples (122), an Optuna study (148)
@pytest.mark.parametrize("prefix", ["122", "148", "244", "295", "311", "312", "333"])
def test_a_solvers_or_pipelines_own_end_of_the_whole_run_is_its_end(prefix):
    d = _diagnose(prefix)
    assert d.run_status.value == "completed", prefix
    assert d.primary_cause is None


def test_a_reinforcement_learning_runs_last_episode_of_its_count_and_total_time_is_its_end():
    # healthy 367 (a committed DRL-2048 log): 'Episode 30/30, Avg Score: 44.80, ..., Avg TD Error: 414.078789, ...'
    # then 'Total training time: 438.83 seconds': an episode counter at its total ends the run, and an error given as
    # a fraction is a metric, not a failure after the summary
    d = _diagnose("367")
    assert d.run_status.value == "completed"
    assert d.primary_cause is None


# the eighteenth batch's completed runs (public logs): a one-epoch SFT whose last line is 'Epoch:[1/1](56608/56608)'
# (420), MindSpore's 'train success' after epoch 300 (434), diffusers' whole-run bar 'Steps: 100%| 250/250' (435),
# CatBoost's 'Stopped by overfitting detector' then its best iteration (436)
@pytest.mark.parametrize("prefix", ["420", "434", "435", "436"])
def test_a_one_epoch_runs_last_step_a_whole_run_bar_and_a_solvers_own_stop_are_its_end(prefix):
    d = _diagnose(prefix)
    assert d.run_status.value == "completed", prefix
    assert d.primary_cause is None


def test_a_bar_over_one_epoch_or_a_one_epoch_run_short_of_its_last_step_is_no_end():
    from ml_skills.engine.analyse.finalcounter import final_counter

    epoch_bar = "Epoch 3: 100%|██████████| 500/500 [01:58<00:00,  4.2it/s, loss=0.31]"
    assert final_counter([epoch_bar], 10, 10) is None
    assert final_counter(["Epoch:[1/1](56550/56608), loss: 2.0205, lr: 0.00000100"], 10, 10) is None
    assert final_counter(["Epoch:[1/1](56608/56608), loss: 1.8960, lr: 0.00000100"], 10, 10) == 10
    assert final_counter(["Steps: 100%|██████████| 250/250 [05:08<00:00,  1.23s/it, loss=0.647]"], 10, 10) == 10
    assert final_counter(["Steps:  40%|████      | 100/250 [02:08<03:00,  1.23s/it, loss=0.647]"], 10, 10) is None


def test_ray_tunes_total_run_time_is_its_end_and_its_status_tables_total_time_column_is_not():
    # healthy 411 (a public Ray Tune report): '3/3 (3 TERMINATED)' then 'Total run time: 15.67 seconds'; corpus 1211
    # (Ray's APEX release test): the status table of a trial still RUNNING, whose header has a 'total time (s)' column
    assert _diagnose("411").run_status.value == "completed"
    d = diagnose(DiagnoseRequest(target=str(next((TESTS / "corpus").glob("1211-*")) / "train.log")))
    assert d.run_status.value != "completed"


def test_megatrons_evaluation_on_the_test_set_is_its_end():
    # healthy 399 (a committed Megatron-LM smoke test): iteration 50 of 50, 'validation loss at iteration 50 on
    # validation set', then 'validation loss at iteration 50 on test set', which Megatron prints once, after training
    assert _diagnose("399").run_status.value == "completed"
