"""The run's last progress point and whether the log has gone quiet since (a hang with no error)."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from datetime import datetime

from ml_skills.collectors import logfile
from ml_skills.engine.analyse.points import fmt, values_text
from ml_skills.engine.read import metrics as metric_parser
from ml_skills.lazyre import lazy
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, LogEvidence, MetricPoint, ProgressPoint, Role, Severity
from ml_skills.safety.redact import redact_cut

STALL_CADENCES = 20  # no progress for 20 step intervals...
STALL_MIN_SECONDS = 20.0  # ...and never less than this, so a pause to save or evaluate is not a hang
CLOCK_SLACK_SECONDS = 120.0  # the log's clock must agree with the file's mtime to judge liveness
KILL_SILENCE_SECONDS = 60.0  # a kill this long after the last progress, and STALL_CADENCES step intervals, ended a stall
_KILLS = (FailureClass.PROCESS_CRASH, FailureClass.STALLED)

# a step or epoch word before a number, or a counter in brackets ('[12/100]')
_PROGRESS = lazy(r"(?i)(\b(step|iter|iteration|epoch|batch|train|test|eval|val)\b\s*(?:[:=#]\s*)?(?:\[\s*)?\d+|\[\s*\d+/\d+\])")
# a tqdm bar: a percentage at its bar ('45%|####'), then its count after the bar's end ('| 450/1000'). Read as two searches,
# the second from the first's end: as one pattern (r"\d+%\|.*\|\s*\d+/\d+") every digit of a run started a percentage read
# to the run's end, and every '1%|' a '.*' read to the line's end and back (twenty-sixth round: 500 tail lines of 2,000
# digits held the CLI 8.8 s, its control 1.7 s). A bar's percentage is searched only from a run's first digit; the first
# one found starts the bar whenever any does (its '.*' reaches every count a later one reaches).
_BAR_START = lazy(r"(?<!\d)\d++%\|")
_BAR_COUNT = lazy(r"\|\s*+\d++/\d")


def is_progress(line: str) -> bool:
    """The line reports training's progress: a step or epoch counter, a bracketed count or a tqdm bar (the same lines
    the one pattern with the bar as its alternative matched, in time linear in the line)."""
    if _PROGRESS.search(line):
        return True
    bar = _BAR_START.search(line)
    return bar is not None and _BAR_COUNT.search(line, bar.end()) is not None
_NOT_TRAINING = lazy(
    r"(?i)(loading|download|\bmap\b|filter|tokeniz|generating|extracting|fetching|resolving|uploading|"
    r"saving|shards|error|traceback|warning|exception|usage:|"
    # an evaluation's bar (Lightning's 'Validating: 90%|', YOLO's 'Class Images Instances ... 100%|'): the run
    # evaluates between and after its epochs, but the training's progress is its own bars and steps
    r"\b(?:valid\w*|eval\w*|test\w*|class\s+images)\b[^|\n]{0,120}\d+%\|)"
)


def last_progress(name: str, points: list[MetricPoint], tail: list[str], tail_start: int) -> ProgressPoint | None:
    best: ProgressPoint | None = None
    for i in range(len(tail) - 1, -1, -1):
        line = tail[i]
        if is_progress(line) and not _NOT_TRAINING.search(line):
            parsed = metric_parser.parse_line(line)
            step = parsed[1] if parsed else None
            epoch = parsed[2] if parsed else None
            best = ProgressPoint(source=name, line_no=tail_start + i, step=step, epoch=epoch,
                                 time=metric_parser.parse_timestamp(line), text=redact_cut(line, 300))
            break
    if points:
        lp = points[-1]
        if best is None or lp.line_no > best.line_no:
            best = ProgressPoint(source=name, line_no=lp.line_no, step=lp.step, epoch=lp.epoch, time=lp.time,
                                 text=values_text(lp.values))
    return best


def check_stall(ev: LogEvidence, points: list[MetricPoint], tail: list[str]) -> None:
    """Add a no-progress anomaly when nothing after the last progress line ends the run."""
    lp = ev.trajectory.last_progress
    if lp is None or ev.mtime is None:
        return
    if any(h.line_no > lp.line_no and h.role is not Role.HINT for h in ev.hits) or any(t.line_no > lp.line_no for t in ev.tracebacks):
        return
    stamp = next((t for line in reversed(tail[-200:]) if (t := metric_parser.parse_timestamp(line[:200])) is not None), None)
    local = ev.mtime.astimezone().replace(tzinfo=None)
    a = no_progress(points, lp, stamp, local, datetime.now())
    if a is None:
        return
    # the age of a file is not a hang: only a process still holding the log open can be hung
    writers = logfile.held_open_by(ev.source)
    if not writers:
        return
    a.detail += f" (pid {', '.join(map(str, writers[:4]))} still holds the log open)"
    ev.trajectory.anomalies.append(a)


def no_progress(points: Sequence[MetricPoint], last_progress: ProgressPoint | None, last_stamp: datetime | None,
                mtime: datetime, now: datetime) -> Anomaly | None:
    """A live-looking log whose last progress line is far older than the run's own step cadence.

    Call only when nothing after the last progress line ends the run (no error, no completion
    marker). Times are naive local times, as logs print them. The log's clock is trusted only
    when its last timestamp agrees with the file's mtime: a copied or downloaded log (mtime far
    newer) or one stamped in another time zone says nothing about whether the job still runs.
    """
    if last_progress is None or last_progress.time is None or last_stamp is None:
        return None
    times = sorted({p.time for p in points if p.time is not None})[-50:]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times) if b > a]
    if len(gaps) < 2 or abs((mtime - last_stamp).total_seconds()) > CLOCK_SLACK_SECONDS:
        return None
    cadence = statistics.median(gaps)
    idle = (now - last_progress.time).total_seconds()
    limit = max(STALL_CADENCES * cadence, STALL_MIN_SECONDS)
    if idle < limit:
        return None
    lp = last_progress
    return Anomaly(
        kind=AnomalyKind.NO_PROGRESS, failure_class=FailureClass.STALLED, severity=Severity.SIGNIFICANT,
        source=lp.source, line_no=lp.line_no, step=lp.step,
        detail=(f"no progress for {idle:.0f}s since line {lp.line_no} (step {fmt(lp.step)}, {lp.time:%Y-%m-%d %H:%M:%S}), "
                f"{idle / max(cadence, 1e-3):.0f}x the run's step cadence of {cadence:.3g}s, with no error and no "
                "completion marker after it: the process is hung (a deadlocked DataLoader worker, a lock, a collective, "
                "I/O) or died without a message; check that it is alive and dump its stacks"),
    )


def stalled_before_kill(ev: LogEvidence, points: list[MetricPoint], tail: list[str], tail_start: int) -> None:
    """Add a no-progress anomaly when the run was killed (a SIGTERM from `timeout` or a person, a cancellation) long
    after its last progress line: the log's own clock says it had stopped stepping first, so the kill ended a hang.

    What ended the run is the kill; why it was killed is the silence before it. A run that stepped every 6 ms and then
    printed nothing for three minutes before 'Received SIGTERM' was stuck (a DataLoader worker blocked on a pipe, a
    lock, a collective), and a relaunch stalls again."""
    lp = ev.trajectory.last_progress
    if lp is None or lp.time is None or any(a.kind is AnomalyKind.NO_PROGRESS for a in ev.trajectory.anomalies):
        return
    if any(t.line_no > lp.line_no for t in ev.tracebacks if t.exc_type and "interrupt" not in t.exc_type.lower()):
        return  # an exception after the last step: it is what ended the run, not the kill
    kill = next((h for h in ev.hits if h.line_no > lp.line_no and h.role is not Role.HINT), None)
    if kill is None or kill.failure_class not in _KILLS or not tail_start <= kill.line_no < tail_start + len(tail):
        return
    at = metric_parser.parse_timestamp(tail[kill.line_no - tail_start][:200])
    times = sorted({p.time for p in points if p.time is not None})[-50:]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times) if b > a]
    if at is None or len(gaps) < 2:
        return
    cadence, silent = statistics.median(gaps), (at - lp.time).total_seconds()
    if silent < max(STALL_CADENCES * cadence, KILL_SILENCE_SECONDS):
        return
    ev.trajectory.anomalies.append(Anomaly(
        kind=AnomalyKind.NO_PROGRESS, failure_class=FailureClass.STALLED, severity=Severity.SIGNIFICANT,
        source=lp.source, line_no=lp.line_no, step=lp.step,
        detail=(f"no progress for {silent:.0f}s between line {lp.line_no} (step {fmt(lp.step)}, {lp.time:%H:%M:%S}) and the "
                f"kill at line {kill.line_no} ({at:%H:%M:%S}), {silent / max(cadence, 1e-3):.0f}x the run's step cadence of "
                f"{cadence:.3g}s: the run had stopped stepping before it was killed (a DataLoader worker blocked on I/O, a "
                "lock, a collective); the kill ended a hang, and a relaunch will stall again"),
    ))

