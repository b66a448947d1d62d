"""Runs from their attempts, and groups of runs by fingerprint, filled in as records arrive.

`Groups.add` takes one finished run at a time (the triage streams), keeps its small record and
updates its row; `rows` orders them: failure groups by size, then completed, running, undecided
and unreadable.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from ml_skills.engine.plan.repeat import decision_after, relaunch_fix_ids, repeat_verdict
from ml_skills.grid.models import AttemptBrief, AttemptRecord, FixRef, Group, Outcome, Repeat, RunRecord

ROW_ORDER = (Outcome.COMPLETED, Outcome.RUNNING, Outcome.UNDECIDED, Outcome.UNREADABLE)


def run_of(name: str, records: list[AttemptRecord]) -> tuple[RunRecord, AttemptRecord]:
    """The run as its newest attempt left it, with the repeat rule applied to the decision."""
    records = sorted(records, key=lambda r: r.attempt)
    last = records[-1]
    briefs = [AttemptBrief(attempt=r.attempt, outcome=r.outcome, fingerprint=r.fingerprint, last_step=r.last_step, path=r.path) for r in records]
    verdict = repeat_verdict(briefs) if len(records) > 1 else last.repeat
    if len(records) == 1 and last.attempts_inside:  # one log a launcher restarted into: its attempts, read by the engine
        briefs = last.attempts_inside
    decision, reason = decision_after(last.decision, last.decision_reason, verdict)
    if verdict is not None and verdict.kind is Repeat.SAME_NO_PROGRESS:  # its plan offers no relaunch (engine/plan/repeat.py)
        last = last.model_copy(update={"fixes": [f for f in last.fixes if f.fix_id not in relaunch_fix_ids()]})
    lost = [r.duration_s for r in records if r.outcome is Outcome.FAILED and r.duration_s is not None]
    run = RunRecord(
        name=name, path=last.path if len(records) == 1 else _common_parent([r.path for r in records]), outcome=last.outcome,
        failure_class=last.failure_class, fingerprint=last.fingerprint, decision=decision, decision_reason=reason,
        last_step=last.last_step, duration_s=sum(lost) if lost else None,
        mtime=max((r.mtime for r in records if r.mtime), default=None), attempts=briefs if len(briefs) > 1 else [],
        repeat=verdict, error=last.error,
    )
    return run, last


def _common_parent(paths: list[str]) -> str:
    import os

    try:
        return os.path.commonpath(paths)
    except ValueError:
        return paths[-1]


class Groups:
    def __init__(self) -> None:
        self.rows: dict[str, Group] = {}
        self.fixes: dict[str, list[list[FixRef]]] = {}
        self.runs: list[RunRecord] = []

    def add(self, run: RunRecord, last: AttemptRecord) -> Group:
        key = last.fingerprint if run.outcome is Outcome.FAILED and last.fingerprint else run.outcome.value
        g = self.rows.get(key)
        if g is None:
            g = Group(outcome=run.outcome, fingerprint=last.fingerprint if run.outcome is Outcome.FAILED else None,
                      failure_class=last.failure_class, rule=last.rule, signature=last.signature, count=0,
                      example_run=run.name, example_line=last.decisive_line or last.error)
            self.rows[key] = g
            self.fixes[key] = []
        g.count += 1
        g.runs.append(run.name)
        if g.example_run is None or run.name < g.example_run:  # the same example whichever worker finished first
            g.example_run, g.example_line = run.name, last.decisive_line or last.error
        if run.mtime is not None:
            g.first_seen = _min(g.first_seen, run.mtime)
            g.last_seen = _max(g.last_seen, run.mtime)
        if run.duration_s is not None and run.outcome is Outcome.FAILED:
            g.compute_lost_s = (g.compute_lost_s or 0.0) + run.duration_s
            g.duration_known += 1
        if run.decision is not None:
            g.decisions[run.decision.value] = g.decisions.get(run.decision.value, 0) + 1
        if run.repeat is not None and run.repeat.kind is Repeat.SAME_NO_PROGRESS:
            g.relaunch_blocked += 1
        if len(self.fixes[key]) < 50:  # the shared plan is read from the first runs; enough to tell shared from not
            self.fixes[key].append(last.fixes)
        g.fixes = shared_fixes(self.fixes[key])
        self.runs.append(run)
        return g

    def ordered(self) -> list[Group]:
        for g in self.rows.values():
            g.runs.sort()
        failed = sorted((g for g in self.rows.values() if g.outcome is Outcome.FAILED), key=lambda g: (-g.count, g.signature or ""))
        rest = [self.rows[o.value] for o in ROW_ORDER if o.value in self.rows]
        return failed + rest

    def counts(self) -> dict[str, int]:
        c = Counter(r.outcome.value for r in self.runs)
        return {o.value: c.get(o.value, 0) for o in Outcome}


def shared_fixes(plans: list[list[FixRef]]) -> list[FixRef]:
    """Fixes every plan holds, in the first plan's order; when none is shared, the most common ones."""
    if not plans:
        return []
    ids = [{f.fix_id for f in p} for p in plans]
    common = set.intersection(*ids) if ids else set()
    first = {f.fix_id: f for p in plans for f in p}
    if common:
        return [f for f in plans[0] if f.fix_id in common]
    counts = Counter(f.fix_id for p in plans for f in p)
    return [first[k] for k, _ in counts.most_common(2)]


def _min(a: datetime | None, b: datetime) -> datetime:
    return b if a is None or b < a else a


def _max(a: datetime | None, b: datetime) -> datetime:
    return b if a is None or b > a else a
