"""The run's last progress point and whether the log has gone quiet since (a hang with no error)."""

from __future__ import annotations

import re
from datetime import datetime

from ml_skills.engine import metrics as metric_parser
from ml_skills.engine.trajectories import no_progress
from ml_skills.models import LogEvidence, MetricPoint, ProgressPoint, Role
from ml_skills.safety.redact import redact

_PROGRESS = re.compile(
    r"(?i)(\b(step|iter|iteration|epoch|batch|train|test|eval|val)\b\s*[:=#]?\s*\[?\s*\d+|\d+%\|.*\|\s*\d+/\d+|\[\s*\d+/\d+\])"
)
_NOT_TRAINING = re.compile(
    r"(?i)(loading|download|\bmap\b|filter|tokeniz|generating|extracting|fetching|resolving|uploading|"
    r"saving|shards|error|traceback|warning|exception|usage:)"
)


def last_progress(name: str, points: list[MetricPoint], tail: list[str], tail_start: int) -> ProgressPoint | None:
    best: ProgressPoint | None = None
    for i in range(len(tail) - 1, -1, -1):
        line = tail[i]
        if _PROGRESS.search(line) and not _NOT_TRAINING.search(line):
            parsed = metric_parser.parse_line(line)
            step = parsed[1] if parsed else None
            epoch = parsed[2] if parsed else None
            best = ProgressPoint(source=name, line_no=tail_start + i, step=step, epoch=epoch,
                                 time=metric_parser.parse_timestamp(line), text=redact(line[:300]))
            break
    if points:
        lp = points[-1]
        if best is None or lp.line_no > best.line_no:
            best = ProgressPoint(source=name, line_no=lp.line_no, step=lp.step, epoch=lp.epoch, time=lp.time,
                                 text=", ".join(f"{k}={v:.4g}" for k, v in lp.values.items()))
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
    if a is not None:
        ev.trajectory.anomalies.append(a)
