"""Whether a log ends in its run's routine: the lines a training loop prints again and again.

A loop prints one template per step, epoch or episode ('Episode 502 Frame 11509 Score: 22.20', a YOLO
epoch row and its mAP row, 'after cycle=857 avg(utility)=311.7'), whatever its framework; the progress
regexes and the metric parser know only some of those shapes. A log whose last lines all belong to
such repeated templates, with numbers that move, and nothing else after them, stops while the run was
still doing its routine: it was cut, or is still being written. That is a run in progress as far as
the log goes, not an unknown.
"""

from __future__ import annotations

from collections import Counter

from ml_skills.lazyre import lazy
from ml_skills.models import LogEvidence, Role

WINDOW = 300  # the last non-blank lines read for templates
REPEATS = 3  # a template is the routine when it recurs this often in the window
_NUMBER = lazy(r"[-+]?(?:\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?|\.\d+)")
# a count or a metric named by a bad word ('0 failures', 'Error (MPJPE): 45.9', 'nan_count=#') is a value
_METRIC_WORD = lazy(r"(?i)#\s*(?:errors?|fail\w*)\b|\b(?:error|fail\w*|nan\w*)\b\s*(?:\([^)\n]{0,30}\))?\s*[:=]\s*#")
# a line of a wait, a poll, a retry, a warning or a failure repeats too, but it is no routine of a training loop
_NOT_ROUTINE = lazy(
    r"(?i)(error|exception|traceback|killed|fatal|abort|fail|timed? ?out|timeout|\bnan\b|\binf\b|retr(?:y|ies|ying)|"
    r"wait|reconnect|heartbeat|barrier|watchdog|attempt|not responding|no progress|stuck|\bhang|checking|polling|"
    r"pending|queued|warn)"
)


def _template(line: str) -> str:
    return " ".join(_NUMBER.sub("#", line).split())


def ends_in_routine(log: LogEvidence) -> bool:
    """The log's last lines are all its loop's repeated lines, one of them a record whose numbers move."""
    if log.tail is None or not log.tail.lines:
        return False
    lines = [(n, x) for n, x in enumerate(log.tail.lines, log.tail.start_line) if x.strip()][-WINDOW:]
    shapes = [_template(x) for _, x in lines]
    counts = Counter(shapes)
    values: dict[str, set[str]] = {}
    for (_, x), shape in zip(lines, shapes, strict=True):
        if "#" in shape:
            values.setdefault(shape, set()).add(" ".join(_NUMBER.findall(x)))
    block = 0
    while block < len(lines) and counts[shapes[-1 - block]] >= REPEATS:
        block += 1
    if block < REPEATS:
        return False
    tail_shapes = shapes[len(shapes) - block:]
    if any(_NOT_ROUTINE.search(_METRIC_WORD.sub("#", s)) for s in set(tail_shapes)):
        return False
    if not any(len(values.get(s, ())) >= 2 for s in tail_shapes):
        return False  # the same lines printed again and again with the same numbers are no progress
    first = lines[len(lines) - block][0]
    return not any(h.line_no >= first and h.role is not Role.HINT for h in log.hits) and \
        not any(t.line_no >= first for t in log.tracebacks)
