"""A launch script's own time limit: coreutils `timeout DURATION python train.py` ends the run at DURATION of wall
time with SIGTERM (or the signal it names), and Python dies of it without a word. Its log then just stops, as a cut
log or a hang does; what tells them apart is the clock: a log that stops with no error and no end about DURATION after
its first line was ended by that limit (the thirteenth user trial's case08: a 30-epoch run under `timeout 40s`)."""

from __future__ import annotations

from datetime import datetime

from ml_skills.engine.read.metrics import parse_timestamp
from ml_skills.lazyre import lazy
from ml_skills.models import Anomaly, AnomalyKind, FailureClass, LogEvidence, Severity

# `timeout [-s SIG] [-k DUR] [--foreground|--preserve-status|-v] DURATION COMMAND`, the duration a number and a unit
_TIMEOUT = lazy(r"(?:^|[;&|(]\s*+|\bexec\s++|\bnohup\s++)timeout\s++"
                r"(?:(?:-s|--signal|-k|--kill-after)(?:=|\s++)\S++\s++|--?[a-z][\w-]*+\s++)*+"
                r"(\d{1,9}(?:\.\d{1,6})?)([smhd]?)\s++\S")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
# the log's first to last time covers the limit but for its start-up (imports, data loading before the first line): at
# least the limit less the larger of 15% of it and up to 30 s (half of a short limit), and not more than the limit plus
# SPAN_SLACK: a log that went on longer was not ended by it
START_SHARE = 0.15
START_MAX = 30.0
SPAN_SLACK = 120.0


def limit_seconds(launch: str | None) -> float | None:
    """The wall-time limit a launch command puts on itself with coreutils `timeout`, in seconds, or None."""
    m = _TIMEOUT.search(launch or "")
    if m is None:
        return None
    secs = float(m[1]) * _UNIT[m[2]]
    return secs if secs > 0 else None  # `timeout 0` is no limit


def _times(log: LogEvidence) -> tuple[datetime, datetime] | None:
    """The first and the last time the log wrote, from its first and last lines that carry one."""
    head = log.head.lines if log.head else []
    tail = log.tail.lines if log.tail else []
    first = next((t for x in head if (t := parse_timestamp(x)) is not None), None)
    last = next((t for x in reversed(tail) if (t := parse_timestamp(x)) is not None), None)
    return (first, last) if first is not None and last is not None else None


def time_limit(launch: str | None, launch_file: str | None, logs: list[LogEvidence]) -> Anomaly | None:
    """The launch's `timeout` as the run's end, when a log of the run spans about its duration and ends with no error,
    no traceback and no completion; else None."""
    secs = limit_seconds(launch)
    if secs is None:
        return None
    for log in logs:
        if "completed-marker" in log.frameworks or log.tracebacks or any(h.role.value == "cause" for h in log.hits):
            continue
        span = _times(log)
        if span is None:
            continue
        took = (span[1] - span[0]).total_seconds()
        if secs - max(START_SHARE * secs, min(START_MAX, secs / 2)) <= took <= secs + SPAN_SLACK:
            where = launch_file or "the launch command"
            return Anomaly(kind=AnomalyKind.LAUNCH_TIME_LIMIT, failure_class=FailureClass.STALLED, severity=Severity.CRITICAL,
                           source=log.source, line_no=log.total_lines or None,
                           detail=f"{where} runs the training under `timeout` with a limit of {secs:g} s; the log spans {took:.0f} s "
                                  f"({span[0]:%H:%M:%S} to {span[1]:%H:%M:%S}) and stops with no error and no end: the limit ended it")
    return None
