"""The engine on every real log of tests/healthy (runs that did not fail), scored by bench/accuracy.py.

Issue 13's target is false alarms <= 2% and run status right >= 90%. The floors below are NOT that target:
they are the figures measured on 2026-12-01 on main's engine at 060af2c, before any engine change for this
set (prospective: the logs were collected and labelled before the engine was run on them), each set just
past the measured value so that a change can only keep or improve them. Raise them (and lower the ceiling)
when the engine gets better; docs/accuracy.md ("Healthy and recovered runs") has the figures and misses.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.engine import accuracy_bench

ROOT = Path(__file__).parents[2]
CHECK = ROOT / "tests" / "healthy" / "check_healthy.py"

# Today's measured figures (2026-12-01, engine at 060af2c), not the goal:
FALSE_ALARM_CEILING = 0.044  # measured: 23/529 after batch 27 (606: a run appended after an early stop read as a loss blow-up); 22/520 after batches 25-26 (2026-12-04; prospective 3/19: a finished Joey-NMT run's rising validation ppl read as memorisation 566, 'Top-1: 0.000' beside an unused 'CE: 0.0000' term 571, a fine-tune's 'lr:0.00000' on a flat loss 580); 19/459 after cases 485-511 (prospective 5/27; the four left are three finished runs whose validation loss rose in their last epochs, read as memorisation, and DeepSpeech's per-sample test report read as a training loss: 485, 486, 496, 494); 4/131 after cases 132-146 (prospective 1/14; 115 and 141 are outlived failures since); 5/116 after cases 117-131 (prospective 2/12); 3/104 after cases 102-116 (prospective 1/14); 2/90 after cases 053-101 (prospective 0/16 and 2/30); 2/44 with cases 042-052; 4/34 on 001-041 before acc-fix
STATUS_RIGHT_FLOOR = 0.81  # measured: 442/541 = 0.817 after batch 25 (2026-12-04); 112/145 with 132-146 (prospective 13/15); 99/130 with 117-131 (91/115 before; running -> unknown is accepted); 053-068 12/16, 069-101 20/33, 102-116 10/15, 117-131 8/15 prospective
# measured: 35/100 = 0.35 after cases 053-101 (19/51 = 0.373 before: the new cases hold 28 logs cut while running,
# whose strict status can only be 'running', which a log alone rarely shows); 6/41 prospective at 060af2c
STATUS_STRICT_FLOOR = 0.74  # 404/541 = 0.747 (2026-12-04, batch 25) with a loop's last record then a closing printed once read as completed (routine.closed_after_routine); 393/535 = 0.735 with a log that ends in its loop's own repeated records read as running (engine/analyse/routine.py; 373/535 before); 90/145 = 0.621 with 132-146 and the running reading of a log that ends in progress; 42/130 = 0.323 with 117-131 (39/115 = 0.339 with 102-116)
MIN_CASES = 40

pytestmark = pytest.mark.slow  # about 8 s: the engine on every healthy log



@pytest.fixture(scope="module")
def bench():
    return accuracy_bench.load()


@pytest.fixture(scope="module")
def healthy(bench):
    return bench.run_healthy()


def test_the_healthy_set_is_valid():
    done = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_every_healthy_case_is_scored(healthy):
    assert len(healthy) >= MIN_CASES
    assert {h.label_status for h in healthy} == {"completed", "recovered", "running", "degraded"}


def test_false_alarms_stay_under_todays_ceiling(healthy):
    not_failed = [h for h in healthy if h.label_status != "degraded"]
    alarms = [(h.name, h.engine_class) for h in not_failed if h.false_alarm]
    assert len(alarms) / len(not_failed) <= FALSE_ALARM_CEILING, alarms


def test_run_status_right_stays_over_todays_floor(healthy):
    wrong = [(h.name, h.label_status, h.engine_status) for h in healthy if not h.status_right]
    assert sum(h.status_right for h in healthy) / len(healthy) >= STATUS_RIGHT_FLOOR, wrong


def test_run_status_right_strict_stays_over_todays_floor(healthy):
    assert sum(h.status_right_strict for h in healthy) / len(healthy) >= STATUS_STRICT_FLOOR


def test_the_healthy_section_is_written(bench, healthy):
    text = "\n".join(bench.healthy_report(healthy))
    assert "## Healthy and recovered runs" in text and "### Every healthy case" in text
    assert "false alarms" in text and "run status right" in text


def test_a_warning_the_run_went_on_past_each_epoch_is_not_a_failure_when_the_log_stops_after_it(healthy):
    """fairseq's '| WARNING: overflow detected, setting loss scale to: 1.0' after every epoch while the loss falls and
    each epoch sets a new best: the log stopping after the last one (to 0.5) does not make it the run's end (264)."""
    h = next(h for h in healthy if h.name.startswith("264-"))
    assert not h.false_alarm, (h.engine_class, h.proximate)


def test_a_run_reaching_its_end_is_read_from_what_a_returned_loop_prints(healthy):
    """Three shapes of a finished run with no 'done' line: the step counter's last log short of its total by less than
    its interval, then the final evaluation (274: 'step: 3300/ 3305' after 3200); YOLOv8's 'Optimizer stripped from
    .../best.pt' then its final validation (270); a W&B run summary holding Hugging Face's whole-run train_runtime (277)."""
    for prefix in ("274-", "270-", "277-"):
        h = next(h for h in healthy if h.name.startswith(prefix))
        assert h.engine_status == "completed" and not h.false_alarm, (prefix, h.engine_status, h.engine_class)


def test_a_finished_run_whose_every_mean_dice_is_near_zero_is_degraded(healthy):
    """'Testing performance in val model: mean_dice : 0.000317' at every evaluation of a 100-epoch run (121)."""
    h = next(h for h in healthy if h.name.startswith("121-"))
    assert h.engine_status == "degraded", (h.engine_status, h.engine_class)
