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
