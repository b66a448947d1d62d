"""watch-run: babysit a live run by diagnosing it again every interval.

Each poll runs the same engine on the same target (a log, a process, a tracker run, a
pipeline), so whatever the engine can detect, the watcher can alert on: a first NaN, a loss
blow-up, validation loss climbing, a throughput collapse, a crash. Between polls it also
watches the progress point itself: no new step for --stall-after seconds is a stall. With
--until-step it checks a fix's validation criterion: the run must get past that step with no
alert.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from pydantic import Field

from ml_skills.engine.pipeline import DiagnoseRequest, _local_paths, diagnose
from ml_skills.models import Model, Progress, RunStatus, wait
from ml_skills.safety import paths

TERMINAL_BAD = {RunStatus.CRASHED, RunStatus.DIVERGED, RunStatus.HUNG}


class WatchEvent(Model):
    at: datetime
    kind: str = Field(description="progress, alert, done")
    message: str
    step: float | None = None


class WatchResult(Model):
    target: str
    polls: int
    healthy: bool
    reason: str
    last_step: float | None
    events: list[WatchEvent]


def watch(
    req: DiagnoseRequest,
    *,
    interval: float,
    max_polls: int | None = None,
    until_step: float | None = None,
    stall_after: float | None = None,
    emit: Callable[[WatchEvent], None] = lambda e: None,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress | None = None,
) -> WatchResult:
    """Poll until the run ends, alerts, stalls or passes until_step. Events go to `emit`; `progress`
    (a terminal's status line, when the CLI has one) hears about each scan and counts down between polls.

    The roots are taken once, from the target as it is when the watch starts: each poll taking them again
    from the log's resolved path followed a log the run had replaced by a link to a file elsewhere."""
    with paths.scope(*_local_paths(req)):
        return _watch(req, interval=interval, max_polls=max_polls, until_step=until_step, stall_after=stall_after, emit=emit,
                      sleep=sleep, progress=progress)


def _watch(
    req: DiagnoseRequest,
    *,
    interval: float,
    max_polls: int | None,
    until_step: float | None,
    stall_after: float | None,
    emit: Callable[[WatchEvent], None],
    sleep: Callable[[float], None],
    progress: Progress | None,
) -> WatchResult:
    stall_after = stall_after if stall_after is not None else max(5 * interval, 300.0)
    events: list[WatchEvent] = []
    seen: set[str] = set()
    last_step: float | None = None
    last_line: int | None = None
    last_change = time.monotonic()
    polls = 0

    def event(kind: str, message: str, step: float | None = None) -> None:
        e = WatchEvent(at=datetime.now(UTC), kind=kind, message=message, step=step)
        events.append(e)
        emit(e)

    def done(healthy: bool, reason: str) -> WatchResult:
        event("done", reason, last_step)
        return WatchResult(target=req.label(), polls=polls, healthy=healthy, reason=reason, last_step=last_step, events=events)

    while True:
        polls += 1
        d = diagnose(req, progress)
        lp = d.last_progress
        step = lp.step if lp else None
        line = lp.line_no if lp else None
        if (step, line) != (last_step, last_line) and lp is not None:
            delta = f" (+{step - last_step:g} steps)" if step is not None and last_step is not None else ""
            event("progress", f"step {step if step is not None else '?'}{delta}: {lp.text[:120]}", step)
            last_step, last_line = step, line
            last_change = time.monotonic()
        for a in d.anomalies:
            key = f"{a.kind.value}:{a.line_no}"
            if key not in seen:
                seen.add(key)
                event("alert", f"{a.kind.value}: {a.detail}", a.step)
        alerts = [e for e in events if e.kind == "alert"]
        if d.run_status in TERMINAL_BAD or (d.primary_cause is not None and d.run_status is not RunStatus.RECOVERED and d.run_status is not RunStatus.COMPLETED and d.run_status is not RunStatus.DEGRADED and d.run_status is not RunStatus.UNKNOWN):
            return done(False, f"{d.run_status.value}: {d.primary_cause.value if d.primary_cause else 'unknown'} - {d.root_cause.proximate[:160]}")
        if alerts:
            return done(False, alerts[0].message[:200])
        if until_step is not None and last_step is not None and last_step >= until_step:
            return done(True, f"reached step {last_step:g} >= {until_step:g} with no alert: the validation criterion holds")
        if d.run_status is RunStatus.COMPLETED:
            return done(True, "the run completed with no alert")
        if time.monotonic() - last_change > stall_after:
            event("alert", f"stalled: no new progress for {time.monotonic() - last_change:.0f}s (last step {last_step})", last_step)
            return done(False, f"stalled: no progress for more than {stall_after:g}s")
        if max_polls is not None and polls >= max_polls:
            return done(True, f"stopped after {polls} polls with no alert")
        wait(interval, f"poll {polls} done, next poll", progress, sleep)
