"""Advice a framework logs about what could go wrong is not a failure after the run's end (analyse/quietend.advice;
batch 27's 607: maskrcnn-benchmark's 'you may encounter an out-of-memory (OOM) error ... If this happens' WARNING,
printed before every evaluation, after 'Total training time' at iteration 60000 of 60000)."""

from __future__ import annotations

from ml_skills.engine.analyse.quietend import fatal

from tests.engine.batchcase import case, verdict


def test_a_finished_run_followed_by_oom_advice_is_completed():
    assert verdict(case("607", "healthy")) == (None, "completed")


def test_advice_is_not_fatal_but_the_error_it_warns_of_is():
    advice = ("2019-07-23 18:48:58,827 maskrcnn_benchmark.data.build WARNING: When using more than one image per GPU you "
              "may encounter an out-of-memory (OOM) error if your GPU does not have sufficient memory.")
    assert not fatal(advice)
    assert fatal("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity)")
    assert fatal("ERROR: the evaluation failed on image 12")
