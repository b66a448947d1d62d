"""The repeat-failure rule: a run's newest attempt read against the last failed one before it.

A relaunch that fails the same way (the same fingerprint) without getting past the step where
the previous attempt failed will fail again: the most expensive mistake in unattended training
is a restart policy that keeps paying for it, so the decision is NO-GO and no plan step that
only relaunches is offered. The same failure after getting further is a transient fault (a
preemption, a flaky node): resuming can finish, GO. check-failed-run (engine/attempts.py) and
triage-runs (grid/groups.py) both decide with this one rule.
"""

from __future__ import annotations

from functools import cache

from ml_skills.engine.classify import fingerprint as fp
from ml_skills.engine.classify.status import fmt_number
from ml_skills.engine.plan.decide import RECOVERY
from ml_skills.models import AttemptBrief, Decision, Diagnosis, Fix, LogEvidence, Outcome, Repeat, RepeatVerdict, RunStatus

NO_PROGRESS_REASON = "relaunching will fail the same way"
RESTART_UNCHANGED_FIXES = {"restart-stalled-unchanged"}
"""Fixes that relaunch with nothing changed though their kind is broader (restart-distributed also excludes a node)."""


def outcome_of(d: Diagnosis) -> Outcome:
    if d.primary_cause is not None:
        return Outcome.FAILED
    if d.run_status in (RunStatus.COMPLETED, RunStatus.RECOVERED):
        return Outcome.COMPLETED
    if d.run_status is RunStatus.RUNNING:
        return Outcome.RUNNING
    return Outcome.UNDECIDED


def last_step(d: Diagnosis, logs: list[LogEvidence]) -> float | None:
    """The furthest step any log reached (a progress line need not carry one: 'saved checkpoint at step 30')."""
    steps = [log.trajectory.last_step for log in logs if log.trajectory.last_step is not None]
    return max(steps) if steps else (d.last_progress.step if d.last_progress else None)


def brief_of(attempt: int, path: str, d: Diagnosis, logs: list[LogEvidence]) -> AttemptBrief:
    outcome = outcome_of(d)
    return AttemptBrief(attempt=attempt, outcome=outcome, fingerprint=fp.of_diagnosis(d)[2] if outcome is Outcome.FAILED else None,
                        last_step=last_step(d, logs), path=path)


def repeat_verdict(attempts: list[AttemptBrief]) -> RepeatVerdict | None:
    """The newest attempt against the newest failed one before it; None with a single attempt."""
    if len(attempts) < 2:
        return None
    last = attempts[-1]
    prev = next((a for a in reversed(attempts[:-1]) if a.outcome is Outcome.FAILED), None)
    if prev is None:
        return None
    where = f"attempt {prev.attempt} failed at step {fmt_number(prev.last_step)}" if prev.last_step is not None else f"attempt {prev.attempt} failed before any step"
    now = f"step {fmt_number(last.last_step)}" if last.last_step is not None else None
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
                         reason=(f"{NO_PROGRESS_REASON}: {where} and attempt {last.attempt} failed with the same fingerprint "
                                 f"{f'at {now}, no further' if now else 'before logging any step'}: the failure is deterministic, "
                                 "fix its cause before relaunching"))


def decision_after(decision: Decision | None, reason: str, verdict: RepeatVerdict | None) -> tuple[Decision | None, str]:
    """The engine's decision for the newest attempt, overruled where the attempts say more."""
    if verdict is not None and verdict.kind is Repeat.SAME_NO_PROGRESS:
        return Decision.NO_GO, verdict.reason
    if verdict is not None and verdict.kind is Repeat.SAME_PROGRESSED:
        return Decision.GO, verdict.reason
    return decision, reason


def relaunches(fix: Fix) -> bool:
    """A plan step that runs the same code again: resume from a checkpoint or restart, nothing changed."""
    return fix.kind in RECOVERY or fix.fix_id in RESTART_UNCHANGED_FIXES


@cache
def relaunch_fix_ids() -> frozenset[str]:
    """The catalog's fixes that only relaunch (for records that keep a fix's id, not its kind)."""
    from ml_skills.catalog.loader import fixes

    return frozenset(fid for fid, t in fixes().items() if t.kind in RECOVERY or fid in RESTART_UNCHANGED_FIXES)


def apply(d: Diagnosis, attempts: list[AttemptBrief]) -> Diagnosis:
    """The diagnosis of the newest attempt with its attempts, the verdict, and the decision and plan it implies."""
    verdict = repeat_verdict(attempts)
    d.attempts, d.repeat = attempts, verdict
    decision, reason = decision_after(d.decision, d.decision_reason, verdict)
    d.decision, d.decision_reason = decision or d.decision, reason
    if verdict is not None and verdict.kind is Repeat.SAME_NO_PROGRESS:
        dropped = [f for f in d.fixes if relaunches(f)]
        d.fixes = [f.model_copy(update={"rank": i}) for i, f in enumerate((f for f in d.fixes if not relaunches(f)), 1)]
        gone = {f.action[:160] for f in dropped}
        d.findings = [x for x in d.findings if x.title not in gone]
        commands = {f.command for f in dropped if f.command}
        d.next_commands = [c for c in d.next_commands if c not in commands]
    return d
