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
WAY_LINES = 3  # lines after the last record that may be the loop saving a checkpoint or starting its next epoch
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


Shapes = tuple[list[tuple[int, str]], list[str], Counter[str], dict[str, set[str]]]


def _shapes(tail: list[str], start: int) -> Shapes:
    """The tail's last WINDOW non-blank lines (line number, text), each one's template, how often each template occurs,
    and the numbers each template was printed with."""
    lines = [(n, x) for n, x in enumerate(tail, start) if x.strip()][-WINDOW:]
    shapes = [_template(x) for _, x in lines]
    values: dict[str, set[str]] = {}
    for (_, x), shape in zip(lines, shapes, strict=True):
        if "#" in shape:
            values.setdefault(shape, set()).add(" ".join(_NUMBER.findall(x)))
    return lines, shapes, Counter(shapes), values


def _failure_from(log: LogEvidence, first: int) -> bool:
    """A failure line (not a hint) or a traceback at or after line `first`."""
    return any(h.line_no >= first and h.role is not Role.HINT for h in log.hits) or any(t.line_no >= first for t in log.tracebacks)


def ends_in_routine(log: LogEvidence) -> bool:
    """The log's last lines are all its loop's repeated lines, one of them a record whose numbers move."""
    if log.tail is None or not log.tail.lines:
        return False
    lines, shapes, counts, values = _shapes(log.tail.lines, log.tail.start_line)
    # a checkpoint written or the next epoch's header after the last record is still the loop's way
    way = 0
    while way < min(WAY_LINES, len(lines)) and counts[shapes[-1 - way]] < REPEATS and _ON_ITS_WAY.search(lines[-1 - way][1]) \
            and not _NOT_ROUTINE.search(lines[-1 - way][1]):
        way += 1
    if way:
        lines, shapes = lines[:-way], shapes[:-way]
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
    return not _failure_from(log, lines[len(lines) - block][0])


CLOSING_LINES = 8  # the one-off lines a script may print once its loop has returned
_ENDED = lazy(r"(?i)\b(done|finish\w*|complete\w*|success\w*)\b")
_CLOSING = lazy(r"(?i)\b(saved?|saving|export\w*|persist\w*|wr[io]te|written|final\w*|total|summary|best|results?|test\w*|"
                r"evaluat\w*)\b")
_EPOCH_HEAD = lazy(r"(?i)\bepoch\b")
# what a loop writes on its way (a checkpoint to resume from, the optimizer's state, an epoch's file), or a counter
# or bar short of its total: training goes on after such lines
_ON_ITS_WAY = lazy(r"(?i)checkpoint|ckpt|optimi[sz]er|\bstate\b|epoch_?\d|stalled \d|\b(\d+)\s*/\s*(\d+)\b|\b\d{1,2}%\|")


def closed_after_routine(log: LogEvidence) -> bool:
    """After the loop's last record come a few lines printed once, none a failure, one of them a closing (a final
    test score, the model written out, 'Done!'): the loop returned and the script wrapped up."""
    if log.tail is None or not log.tail.lines:
        return False
    lines, shapes, counts, values = _shapes(log.tail.lines, log.tail.start_line)
    last = next((i for i in range(len(lines) - 1, -1, -1)
                 if counts[shapes[i]] >= REPEATS and len(values.get(shapes[i], ())) >= 2
                 and not _NOT_ROUTINE.search(_METRIC_WORD.sub("#", shapes[i]))), None)
    if last is None:
        return False
    after = shapes[last + 1 :]
    if not 0 < len(after) <= CLOSING_LINES or any(counts[s] > 2 for s in after):
        return False
    if any(_NOT_ROUTINE.search(_METRIC_WORD.sub("#", s)) for s in after):
        return False
    if _failure_from(log, lines[last + 1][0]):
        return False
    before = set(shapes[:last])
    if any(s in before and _EPOCH_HEAD.search(s) for s in after):
        return False  # an epoch header printed before the loop's records, printed again: the next epoch began (healthy 795)
    texts = [x for _, x in lines[last + 1 :]]
    if any(_ENDED.search(x) for x in texts):
        return True
    return any(_CLOSING.search(x) for x in texts) and not any(_ON_ITS_WAY.search(x) for x in texts)
