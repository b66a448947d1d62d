"""Whether a log shows its run reaching its end, when no completion message says so.

A run that printed the last epoch or step of its own configured total ('Epoch 5/5', 'step 1000/1000',
'[100/100]') and nothing fatal after it finished training, whatever it printed next; so did a process
whose runner reported exit code 0 (an IDE's 'Process finished with exit code 0', LSF's 'Successfully
completed.'). Either is read from the run's own counters, never from how old the file is.
Each shape of such an end is read in a module of its own; run_end tries them in turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from ml_skills.engine.analyse.etazero import eta_reached_zero
from ml_skills.engine.analyse.finalcounter import final_counter
from ml_skills.engine.analyse.finalresult import final_result_after_training
from ml_skills.engine.analyse.lastiteration import last_iteration
from ml_skills.engine.analyse.plannedtotal import planned_last_epoch, same_end_as_earlier_runs
from ml_skills.engine.analyse.runsummary import summary_after_training
from ml_skills.models import MetricPoint


def run_end(tail: list[str], tail_start: int, last_progress_line: int | None,
            points: Sequence[MetricPoint] = ()) -> int | None:
    """The line that shows the run reached its end when no completion message says so: its own counter reaching
    its configured total, a summary of the whole run after its last step, a final test result or model save, a
    whole-run ETA of zero, the last iteration of a loop that logs every N steps, or a 0-based epoch counter ending on
    the last epoch of a round total."""
    for shape in (final_counter, summary_after_training, final_result_after_training, eta_reached_zero, last_iteration):
        if (line := shape(tail, tail_start, last_progress_line)) is not None:
            return line
    return planned_last_epoch(tail, tail_start, points) or same_end_as_earlier_runs(tail, tail_start, points)
