"""Attempts of one run, and the repeat-failure rule that reads the last one against the one before.

An attempt is named by a word and a number: attempt-2/, retry_1/, train.restart3.log, or a
resubmitted cell's directory `lr0.1-seed1-retry1` beside `lr0.1-seed1`. Without a number it is
the first launch (attempt 0). A relaunch that fails the same way without getting past the step
where the previous attempt failed will fail again: the most expensive mistake in unattended
training is a restart policy that keeps paying for it.
"""

from __future__ import annotations

import re

from ml_skills.engine.status import fmt_number
from ml_skills.grid.models import AttemptBrief, Outcome, Repeat, RepeatVerdict

_ATTEMPT = re.compile(r"(?i)(?:^|[-_.])(?:attempt|retry|restart|resubmit|rerun|try)[-_.]?(\d+)(?=$|[-_.])")

NO_PROGRESS_REASON = "relaunching will fail the same way"


def split_name(name: str) -> tuple[str, int]:
    """('lr0.1-seed1', 2) for 'lr0.1-seed1-retry2'; (name, 0) when the name carries no attempt number."""
    m = None
    for m in _ATTEMPT.finditer(name):
        pass
    if m is None:
        return name, 0
    key = (name[: m.start()] + name[m.end():]).strip("-_.")
    return key, int(m.group(1))


def repeat_verdict(attempts: list[AttemptBrief]) -> RepeatVerdict | None:
    """The newest attempt against the newest failed one before it; None with a single attempt."""
    if len(attempts) < 2:
        return None
    last = attempts[-1]
    prev = next((a for a in reversed(attempts[:-1]) if a.outcome is Outcome.FAILED), None)
    if prev is None:
        return None
    where = f"attempt {prev.attempt} failed at step {fmt_number(prev.last_step)}" if prev.last_step is not None else f"attempt {prev.attempt} failed before any step"
    now = f"step {fmt_number(last.last_step)}" if last.last_step is not None else "no step"
    if last.outcome in (Outcome.COMPLETED, Outcome.RUNNING):
        return RepeatVerdict(kind=Repeat.RECOVERED, previous_attempt=prev.attempt, previous_step=prev.last_step, last_step=last.last_step,
                             reason=f"{where}; attempt {last.attempt} is {last.outcome.value}: the earlier failure was transient")
    if last.outcome is not Outcome.FAILED or last.fingerprint != prev.fingerprint:
        return RepeatVerdict(kind=Repeat.DIFFERENT, previous_attempt=prev.attempt, previous_step=prev.last_step, last_step=last.last_step,
                             reason=f"{where}; attempt {last.attempt} ended differently ({last.outcome.value}): read it as its own failure")
    progressed = last.last_step is not None and (prev.last_step is None or last.last_step > prev.last_step)
    if progressed:
        return RepeatVerdict(kind=Repeat.SAME_PROGRESSED, previous_attempt=prev.attempt, previous_step=prev.last_step, last_step=last.last_step,
                             reason=(f"{where}; attempt {last.attempt} failed the same way but only after getting further ({now}): "
                                     "a transient fault, a relaunch from the newest checkpoint can finish"))
    return RepeatVerdict(kind=Repeat.SAME_NO_PROGRESS, previous_attempt=prev.attempt, previous_step=prev.last_step, last_step=last.last_step,
                         reason=(f"{NO_PROGRESS_REASON}: {where} and attempt {last.attempt} failed with the same fingerprint at {now}, "
                                 "no further: the failure is deterministic, fix its cause before relaunching"))
