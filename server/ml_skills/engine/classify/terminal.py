"""Whether the run went on past a line, and where its last attempt starts: what ended a run is what it did not go on from.

A line logged at INFO level, an error followed by real training progress, a failure before a later attempt that
ran clean or before a resubmitted job's output: each was survived, and counts little against the line that ended the run.
"""

from __future__ import annotations

import math
import re

from ml_skills.collectors.attempts import REPORT_END
from ml_skills.engine.analyse.stops import AT_SYNC_POINT, BEFORE_FIRST_STEP, stop_signals
from ml_skills.engine.read.levels import ERROR_WORDS
from ml_skills.engine.read.metrics import parse_line
from ml_skills.engine.read.tracebacks import RECORD_HEAD as _RECORD_HEAD
from ml_skills.engine.read.tracebacks import failed_again
from ml_skills.lazyre import lazy
from ml_skills.models import LogEvidence, Role

# An error counts as survived only if training went on for this many progress lines after it:
# a DataLoader still hands out the batches its other workers prefetched (2 per worker) after
# one worker dies, and loggers flush late, so one or two step lines do not mean recovery.
SURVIVED_MIN_PROGRESS = 3
# ...or, after an exception that ended a thread other than the main one, for this many non-blank lines of any kind up to
# its last progress: a program that loads a model and starts a bar after a reader thread died was not waiting for that thread
# (one that waits prints its prefetched steps and stops)
THREAD_LINES_AFTER = 20
def last_progress_line(log: LogEvidence) -> int | None:
    lp = log.trajectory.last_progress
    return lp.line_no if lp else None


_DIGITS = lazy(r"\d+")
RETRY_OPENING = 10
# the tag a launcher puts on each line of one rank: torch's '[rank3]:', torchrun --tee's '[default3]:', mpirun's '[1,3]<stderr>:'
_RANK_TAG = lazy(r"^(\[(rank|default)\d+\]:|\[\d+,\d+\]<std(out|err)>:)")
_STACKISH = lazy(r'(^\s*File "|^\s*-+>|Traceback|^\S+ in \w+\(|^\s*\d+\s+\S)')


def clean_retry_start(log: LogEvidence) -> int | None:
    """The line where a later attempt, appended to the same log after a failure, starts and then runs without error
    and trains or finishes.

    A retry prints its start-up again: a non-metric line seen once before the last failure (digits, such as
    timestamps, aside) comes back once after it. If nothing fatal follows that line, the run went on past the
    earlier failure the way it goes on past a survived error (healthy 006: a Hydra error, then a second attempt
    that trained, tested and closed its loggers).
    """
    tail = log.tail
    fatal = sorted({t.line_no for t in log.tracebacks} | {h.line_no for h in log.hits if h.role is not Role.HINT})
    if tail is None or not fatal or tail.start_line > 1:
        return None
    last_fatal = fatal[-1]
    # a rank's tag is kept whole (rank 0 printing what rank 2 printed is no retry) and read past for the rest
    tags = [m.group(0) if (m := _RANK_TAG.match(x)) else "" for x in tail.lines]
    lines = [x[len(t):] for x, t in zip(tail.lines, tags)]
    norm = [t + _DIGITS.sub("#", x.strip()) for x, t in zip(lines, tags)]
    # the log's opening lines (its first ten that say something), before any failure: what a start-up prints
    before: dict[str, int] = {}
    opening = [i for i, x in enumerate(norm) if x][:RETRY_OPENING]
    for i in opening:
        x = norm[i]
        if tail.start_line + i >= fatal[0]:
            break
        if (len(x) > 20 and not lines[i][:1].isspace() and parse_line(tail.lines[i]) is None and not ERROR_WORDS.search(x)
                and not _STACKISH.search(lines[i]) and len(re.findall(r"[A-Za-z]{3,}", x)) >= 2):
            before[x] = norm.count(x)
    for i, x in enumerate(norm):
        n = tail.start_line + i
        if n <= last_fatal:
            continue
        if before.get(x) == 2:
            # a retry runs code again; a stack printed again (a notebook's traceback, a second worker's) is no retry
            return None if any(_STACKISH.search(y) for y in lines[i:]) or not _got_somewhere(log, n, norm, last_fatal) else n
    return None


_CLOCK = lazy(r"\d{1,4}[-/:]\d{1,2}[-/:]\d{1,4}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?(?:[.,]\d+)?|\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?")
def _counts(line: str) -> list[str]:
    """The numbers of a line other than its dates and times: where a run was when it printed it."""
    return _DIGITS.findall(_CLOCK.sub(" ", line[:2000]))


def _got_somewhere(log: LogEvidence, start: int, norm: list[str], failed_at: int) -> bool:
    """The retry went further than its start-up. A relaunch that made no progress and whose log ends on a line the
    failed attempt also printed before it failed (1324: 'Starting Evaluation (0)...', where the first launch ran out of
    memory), or waiting at its first barrier or before its first step (1301: the launch before it failed at its first
    collective), has not gone past the failure before it: the log stops where that failure happened."""
    tail = log.tail
    if tail is None:
        return True
    first = tail.start_line
    before = norm[: max(0, failed_at - first)]

    def start_up(i: int) -> bool:
        """Line i (of the tail) is one the failed attempt printed once before its failure, at the same step or epoch
        ('Starting training from epoch 0' again; 'Train Epoch: 1516' after 'Train Epoch: 1515' is progress)."""
        if not 0 <= i < len(norm) or before.count(norm[i]) != 1:
            return False
        return _counts(tail.lines[before.index(norm[i])]) == _counts(tail.lines[i])

    lp = last_progress_line(log)
    if lp is not None and lp > start and not start_up(lp - first):
        return True  # it trained past its start-up
    said = [i for i, x in enumerate(norm) if x]
    if said and start_up(said[-1]):
        return False
    return not any(s.label in (AT_SYNC_POINT, BEFORE_FIRST_STEP) and (s.line_no or 0) > start for s in stop_signals(log))


# the closing verdict of a scheduler's job report (LSF's), printed once per job: a file of several such reports holds
# several attempts, each report closing the output above it
_REPORT_END = lazy(REPORT_END)


def last_attempt_start(log: LogEvidence) -> int | None:
    """The first line of the last attempt, when the log appends several jobs' outputs each closed by its job report.

    A resubmitted job's output is appended to the same file after the first job's report; what ended the run is
    what ended the last attempt, and a failure of an earlier one (an OOM at batch 16, then a resubmission at batch
    12) is history, as a survived error is. None when the log holds one attempt (or the report is outside the tail).
    """
    tail = log.tail
    if tail is None:
        return None
    ends = [tail.start_line + i for i, x in enumerate(tail.lines) if _REPORT_END.match(x)]
    later = [e for e in ends if any(e < n for n in _fatal_lines(log))]
    return later[-1] + 1 if later else None


def _fatal_lines(log: LogEvidence) -> set[int]:
    return {t.line_no for t in log.tracebacks} | {h.line_no for h in log.hits if h.role is not Role.HINT}


def progress_after(log: LogEvidence, line_no: int) -> tuple[int, int] | None:
    """The first and last training-progress lines after `line_no` in the log's tail: where the run went on."""
    tail = log.tail
    if tail is None:
        return None
    def progress(i: int) -> bool:
        return (p := parse_line(tail.lines[i])) is not None and (p[1] is not None or "loss" in p[0])

    after = range(max(0, line_no + 1 - tail.start_line), len(tail.lines))  # parsed from each end, not every line
    first = next((i for i in after if progress(i)), None)
    if first is None:
        return None
    return tail.start_line + first, tail.start_line + next(i for i in reversed(after) if progress(i))


def last_finite_loss_line(log: LogEvidence) -> int | None:
    """The last progress line of the log's tail that logs a finite loss: a skipped step before it was gone past."""
    tail = log.tail
    if tail is None:
        return None
    for i in range(len(tail.lines) - 1, -1, -1):
        p = parse_line(tail.lines[i])
        if p is not None and "loss" in p[0] and math.isfinite(p[0]["loss"]):
            return tail.start_line + i
    return None


def survived_line(log: LogEvidence, line_no: int, last_prog: int | None) -> bool:
    """Did training make real progress after this line (not just prefetched batches)?"""
    retry = clean_retry_start(log)
    if retry is not None and line_no < retry:
        return True  # a later attempt started after it and ran without error
    attempt = last_attempt_start(log)
    if attempt is not None and line_no < attempt:
        return True  # a later attempt was launched after it: the run went on past it (and ended for its own reason)
    if _failed_again_later(log, line_no):
        return True  # the program ran again and its last attempt failed on its own (a wrapper's record per attempt)
    if last_prog is None or line_no >= last_prog:
        return False
    tail = log.tail
    if tail is None or line_no < tail.start_line:
        return True  # the error is older than the tail: far more than a few steps followed
    if _in_other_thread(log, line_no) and _lines_between(log, line_no, last_prog) >= THREAD_LINES_AFTER:
        return True  # a thread's exception ends that thread; the program went on, well past it, to progress
    at = line_no - tail.start_line + 1
    reached: float | None = None
    progress = 0
    for text in tail.lines[at:]:
        parsed = parse_line(text)
        # a step counter, or a training loss on a line of its own (Keras' '19/19 - 12s - loss: 0.0809' per epoch)
        if parsed is not None and (parsed[1] is not None or "loss" in parsed[0]):
            if parsed[1] is not None and _PEER.search(text):
                reached = _steps_reached(tail.lines[:at]) if reached is None else reached
                if parsed[1] <= reached:
                    continue  # a peer rank's late line for a step the run had already reached: catch-up, not progress
            progress += 1
            if progress >= SURVIVED_MIN_PROGRESS:
                return True
    return False


_STAMPED = lazy(r"^\W{0,2}\d{4}-\d\d-\d\d|^\W{0,2}\d\d:\d\d:\d\d")  # another record's start: a date or a time first
RECORD_LINES = 6  # the lines a record's message may go on below its first


def _failed_again_later(log: LogEvidence, line_no: int) -> bool:
    """A failure record that the same record, further down, follows with another failure: the program was run again
    (a training wrapper's 'Training failed: <why>' once per attempt, a day apart) and what ended its last attempt is the
    later one (batch 20's 1299: a CUDA illegal instruction, then a missing import, then the dataset check). A later
    record naming a peer's or a collective's failure is a cascade's echo of this one, never a new attempt."""
    tail = log.tail
    if tail is None or not tail.start_line <= line_no < tail.start_line + len(tail.lines):
        return False
    at = line_no - tail.start_line
    # the record the line belongs to: its own, or the one a few lines above whose message goes on over them
    # (PyTorch's 'CUDA kernel errors might be asynchronously reported...' under 'Training failed: CUDA error: ...')
    i = next((j for j in range(at, max(-1, at - RECORD_LINES - 1), -1) if _RECORD_HEAD.match(tail.lines[j])
              or j < at and _STAMPED.match(tail.lines[j])), None)
    if i is None or not _RECORD_HEAD.match(tail.lines[i]):
        return False
    return any(failed_again(tail.lines, i, j) for j in range(i + 1, len(tail.lines)))


# Python's header for an exception that ended a thread other than the main one ('Exception in thread Thread-2
# (_readerthread):'): the thread dies, the program does not
_THREAD_HEADER = lazy(r"^\s*Exception in thread (?!MainThread\b)\S")


def _in_other_thread(log: LogEvidence, line_no: int) -> bool:
    """The traceback ending at `line_no` was printed for a thread other than the main one."""
    tb = next((t for t in log.tracebacks if t.line_no == line_no), None)
    tail = log.tail
    if tb is None or tail is None:
        return False
    i = tb.start_line - 1 - tail.start_line  # the line above 'Traceback (most recent call last):'
    return 0 <= i < len(tail.lines) and _THREAD_HEADER.match(tail.lines[i]) is not None


def _lines_between(log: LogEvidence, after: int, upto: int) -> int:
    """Non-blank lines of the tail after line `after` up to line `upto`."""
    tail = log.tail
    if tail is None:
        return 0
    chunk = tail.lines[max(0, after + 1 - tail.start_line) : max(0, upto + 1 - tail.start_line)]
    return sum(1 for x in chunk if x.strip())


# a line a rank tagged as its own ('rank 1 step 2', '[rank1]:', torchrun's '[default1]:', srun -l's '1: ')
_PEER = lazy(r"(?i)\brank\s*[:=#]?\s*\d+\b|^\[default\d+\]:|^\d{1,4}: ")


def _steps_reached(lines: list[str]) -> float:
    """The highest step counter printed before a line: a peer's step lines at or below it, printed late (a lagging
    or buffered logger), are the run catching up on its log, not going on past the line."""
    steps = [p[1] for x in lines if (p := parse_line(x)) is not None and p[1] is not None]
    return max(steps, default=float("-inf"))
