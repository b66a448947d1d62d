"""Diagnose one attempt with the engine and keep only what a grid needs (runs in a worker process).

The engine's `diagnose` is `collect` then `analyse`; the worker calls the two halves itself so
that the log evidence it already holds (first and last lines, mtime) gives the attempt's
timing without reading the log twice. The class, the decision and the plan are the engine's,
untouched: there is no second classifier here.
"""

from __future__ import annotations

import contextlib
import functools
from datetime import datetime
from pathlib import Path

from ml_skills.engine import attempts
from ml_skills.engine.classify import fingerprint as fp
from ml_skills.engine.pipeline import DiagnoseRequest, analyse, collect
from ml_skills.engine.plan.repeat import last_step, outcome_of
from ml_skills.engine.read.metrics import parse_timestamp
from ml_skills.errors import MLSkillsError
from ml_skills.grid.models import AttemptRecord, AttemptTask, FixRef, Outcome
from ml_skills.models import Diagnosis, LogEvidence
from ml_skills.policy import rules
from ml_skills.safety import paths
from ml_skills.safety.redact import redact, reset_redaction_count

TOP_FIXES = 3


@functools.lru_cache(maxsize=4)
def _policy(wire: str | None) -> rules.Policy:
    """The grid's policy, rebuilt once per worker process (the shipped default when none was given)."""
    return rules.from_wire(wire) if wire is not None else rules.load()


def diagnose_attempt(task: AttemptTask, last: int = 500) -> AttemptRecord:
    """Never raises: a run that cannot be read is a record with its error (its own row of the summary)."""
    def unreadable(why: str) -> AttemptRecord:
        return AttemptRecord(run=task.run, attempt=task.attempt, path=task.path, outcome=Outcome.UNREADABLE, error=why)

    if task.error:
        return unreadable(redact(task.error))
    # a pool worker starts with no active roots, and the engine would then take the attempt's own
    # (resolved) path as its root: a symlinked attempt-1/ in a run would be read wherever it points
    confined = paths.within([Path(r) for r in task.roots]) if task.roots is not None else contextlib.nullcontext()
    try:
        reset_redaction_count()
        match task.source:
            case "mlflow":
                req = DiagnoseRequest(mlflow=task.path, last=last)
            case "wandb":
                req = DiagnoseRequest(wandb=task.path, last=last)
            case _:
                req = DiagnoseRequest(target=task.path, last=last)
        risk_of = _policy(task.policy).risk_of
        with confined:
            ev = collect(req)
            d = analyse(req, ev, risk_of)
            if (inside := attempts.of_log(req, ev)) is not None:  # a launcher's restarts inside one log
                d = attempts.with_log_attempts(req, d, inside, risk_of)
    except MLSkillsError as e:
        return unreadable(redact(str(e))[:500])
    except Exception as e:  # noqa: BLE001 - one bad run must not stop a grid of a thousand
        return unreadable(f"internal error: {type(e).__name__}: {redact(str(e))[:400]}")
    return from_diagnosis(task, d, ev.logs)


def _times(logs: list[LogEvidence]) -> tuple[datetime | None, datetime | None]:
    first: datetime | None = None
    last: datetime | None = None
    for log in logs:
        for line in (log.head.lines if log.head else []):
            if (t := parse_timestamp(line)) is not None:
                first = t if first is None or t < first else first
                break
        for line in reversed(log.tail.lines if log.tail else []):
            if (t := parse_timestamp(line)) is not None:
                last = t if last is None or t > last else last
                break
    return first, last


def from_diagnosis(task: AttemptTask, d: Diagnosis, logs: list[LogEvidence]) -> AttemptRecord:
    outcome = outcome_of(d)
    line = d.root_cause.proximate_line.text if d.root_cause.proximate_line else None
    rule, sig, fingerprint = fp.of_diagnosis(d)
    started, ended = _times(logs)
    duration = (ended - started).total_seconds() if started and ended and ended >= started else None
    mtimes = [log.mtime for log in logs if log.mtime is not None] + ([task.seen] if task.seen else [])
    return AttemptRecord(
        run=task.run, attempt=task.attempt, path=task.path, outcome=outcome, run_status=d.run_status,
        failure_class=d.primary_cause, rule=rule, fingerprint=fingerprint, signature=sig,
        decisive_line=line[:300] if line else None, decision=d.decision, decision_reason=d.decision_reason[:400],
        fixes=[FixRef(fix_id=f.fix_id, action=f.action[:200], risk=f.risk) for f in d.fixes[:TOP_FIXES]],
        last_step=last_step(d, logs), started=started, ended=ended, duration_s=duration, mtime=max(mtimes) if mtimes else None,
        error=d.insufficient_evidence[:300] if outcome is Outcome.UNDECIDED and d.insufficient_evidence else None,
        attempts_inside=d.attempts, repeat=d.repeat,
    )
