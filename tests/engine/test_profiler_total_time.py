"""A profiler's 'Total time used in this flop counting step' is printed at a step, not at the run's end.

Healthy 337 (a public llama-recipes report): FSDP fine-tuning at epoch 1 of 10, step 5 of 106, with the flop
counter's table after its 'Total time used in this flop counting step is: 2.6' line; the run is in progress.
"""

from __future__ import annotations

from pathlib import Path

from ml_skills.engine.pipeline import DiagnoseRequest, diagnose

TESTS = Path(__file__).resolve().parents[1]


def test_a_flop_counters_total_time_is_no_end():
    log = next((TESTS / "healthy").glob("337-*")) / "train.log"
    d = diagnose(DiagnoseRequest(target=str(log)))
    assert d.run_status.value != "completed"
    assert d.primary_cause is None
