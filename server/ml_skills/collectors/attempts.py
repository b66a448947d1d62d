"""The attempts of one run: attempt-2/ folders, train.retry1.log, a resubmitted cell's lr0.1-retry1.

An attempt is named by a word and a number: attempt-2/, retry_1/, train.restart3.log, or a
resubmitted cell's directory `lr0.1-seed1-retry1` beside `lr0.1-seed1`. Without a number it is
the first launch (attempt 0). Only directories are listed and files stat'ed (nothing is opened),
at most two levels under a run and MAX_ENTRIES entries a directory. check-failed-run reads a run
directory's attempts with `attempts_of`; triage-runs finds runs and their attempts with it too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from ml_skills.collectors.artifacts import _LOG as LOG_NAME
from ml_skills.lazyre import lazy

MAX_ENTRIES = 2_000  # per directory looked into below a run

_ATTEMPT = lazy(r"(?i)(?:^|[-_.])(?:attempt|retry|restart|resubmit|rerun|try)[-_.]?(\d+)(?=$|[-_.])")


def split_name(name: str) -> tuple[str, int]:
    """('lr0.1-seed1', 2) for 'lr0.1-seed1-retry2'; (name, 0) when the name carries no attempt number."""
    m = None
    for m in _ATTEMPT.finditer(name):
        pass
    if m is None:
        return name, 0
    key = (name[: m.start()] + name[m.end():]).strip("-_.")
    return key, int(m.group(1))


def is_log(name: str) -> bool:
    return bool(LOG_NAME.search(name))


def entries(path: str, cap: int = MAX_ENTRIES) -> list[os.DirEntry[str]]:
    with os.scandir(path) as it:
        out = []
        for e in it:
            out.append(e)
            if len(out) >= cap:
                break
        return sorted(out, key=lambda e: e.name)


def isdir(e: os.DirEntry[str], follow: bool = True) -> bool:
    """DirEntry.is_dir that says False, not raises, for a symlink loop (ELOOP)."""
    try:
        return e.is_dir(follow_symlinks=follow)
    except OSError:
        return False


def newest_mtime(path: str, depth: int = 2) -> float | None:
    """The newest mtime of the log files under `path` (two levels, bounded), or of the file itself."""
    try:
        if not os.path.isdir(path):
            return os.stat(path).st_mtime
        best: float | None = None
        stack = [(path, 0)]
        while stack:
            d, level = stack.pop()
            for e in entries(d):
                try:
                    if isdir(e, follow=False):
                        if level < depth and not e.name.startswith("."):
                            stack.append((e.path, level + 1))
                    elif is_log(e.name) and not isdir(e):  # a FIFO or a device named like a log is a run the engine will refuse, not nothing
                        m = e.stat(follow_symlinks=False).st_mtime
                        best = m if best is None or m > best else best
                except OSError:
                    continue
        return best
    except OSError:
        return None


def has_log(path: str, depth: int = 2) -> bool:
    return newest_mtime(path, depth) is not None


def attempts_of(run_dir: str) -> list[tuple[int, str]]:
    """(attempt number, path) of a run directory: attempt-N/ subdirectories and retry-numbered logs,
    else the directory itself as the one attempt."""
    found = entries(run_dir)
    subdirs = [(n, e.path) for e in found if isdir(e) for key, n in [split_name(e.name)] if n and not key and has_log(e.path, 1)]
    logs = [(split_name(e.name), e.path) for e in found if is_log(e.name) and not isdir(e)]
    numbered = [(n, p) for (key, n), p in logs if n]
    if not subdirs and not numbered:
        return [(0, run_dir)]
    keys = {split_name(Path(p).name)[0] for _, p in numbered}
    firsts = [p for (key, n), p in logs if not n and key in keys]
    unnumbered = [p for (_, n), p in logs if not n]
    if not numbered and len(unnumbered) == 1:  # the first launch logged here, its relaunches into attempt-N/
        firsts = unnumbered
    return sorted(subdirs + numbered + [(0, p) for p in firsts[:1]])


# ---------------------------------------------------------------- attempts inside one log

MAX_SPLIT_BYTES = 1024 * 1024 * 1024
"""A log is split into attempts only up to this size (one more streamed pass); a bigger one is read as one run."""
MAX_ATTEMPTS = 16  # the newest ones kept: the rule reads the newest against the last failed before it
MAX_LINE = 64 * 1024  # a longer line is kept cut
ATTEMPT_BYTES = 8 * 1024 * 1024  # of each attempt's tail, as the log's own tail (logfile.tail): the newest lines kept
CHUNK = 1024 * 1024

# torchelastic's agent, each time a worker group fails (torch/distributed/elastic/multiprocessing/api.py), whether
# it then restarts the group or gives up: "failed (exitcode: -9) local_rank: 0 (pid: 25689) of binary: /usr/bin/python"
_ELASTIC_FAILED = lazy(rb"failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\) of binary")
# what the launcher raises when it gives up: after it, nothing else ran
_ELASTIC_GAVE_UP = lazy(rb"ChildFailedError")
# LSF's job report below a job's output (bsub -o appends every job to one file): its verdict line ends that job, so
# a resubmitted job's output follows the earlier job's report (corpus 451, 560). Reports printed above their output
# ('The output (if any) follows:') are not split: the verdict would fall before the job it closes.
REPORT_END = r"^(Exited with exit code \d+\.|Exited with signal termination: \w+\.?|Successfully completed\.)\s*$"
_REPORT_END = lazy(REPORT_END.encode())
_REPORT_END_ANY = lazy(REPORT_END.encode(), re.MULTILINE)
_REPORT_ABOVE = lazy(rb"^The output \(if any\) follows:", re.MULTILINE)
# the rest of such a report after its verdict: usage figures, the closing sentence, rules and blank lines
# the spaces around a line's text read by one quantifier each: `^\s*(...)?\s*$` tried every split of a line of spaces
# between the two (a line of 60,000 spaces after a report's verdict held the CLI 17 s; twenty-third round)
_REPORT_REST = lazy(rb"^\s*(?:(Resource usage summary:|[A-Z][\w ]+ :\s.*|The output \(if any\) is above this job summary\.|"
                          rb"Read file <.*> for std\w+ output of this job\.|PS:|-{10,})\s*)?$")


def log_attempts(path: str, keep: int = 500) -> list[tuple[int, int, str]] | None:
    """(attempt, first line number, its last `keep` lines) of each attempt a launcher restarted inside one log,
    oldest first (the newest MAX_ATTEMPTS); None for one attempt.

    torchrun --max-restarts relaunches its workers into the same stdout: every worker-group failure
    ends an attempt, and whatever the workers print after it is the next one, unless the launcher
    gave up there (its ChildFailedError block closes the log; it belongs to no attempt). LSF appends
    each resubmitted job to the same output file, each job's output closed by its report's verdict.
    The log is streamed once, keeping each attempt's tail, as the engine keeps a log's.
    """
    from collections import deque

    from ml_skills.collectors.logfile import check_readable
    from ml_skills.safety.paths import open_binary

    p = check_readable(path)
    if p.stat().st_size > MAX_SPLIT_BYTES:
        return None
    spans: deque[tuple[int, _Tail]] = deque(maxlen=MAX_ATTEMPTS)  # (last line number, its tail)
    tail = _Tail(keep)
    line_no, gave_up, count = 0, False, 0
    pending = b""  # a line not ended yet, at most MAX_LINE bytes of it
    with open_binary(p) as f:
        while True:
            chunk = f.read(CHUNK)
            data = pending + chunk
            end = len(data) if not chunk else data.rfind(b"\n") + 1
            block, pending = data[:end], data[end:][:MAX_LINE]
            if _REPORT_ABOVE.search(block):
                return None
            if not _ELASTIC_FAILED.search(block) and not _ELASTIC_GAVE_UP.search(block) and not _REPORT_END_ANY.search(block):
                # most of a log: no line looked at
                n = block.count(b"\n") + (0 if block.endswith(b"\n") or not block else 1)
                last = block.removesuffix(b"\n").rsplit(b"\n", keep)[-keep:] if block else []
                tail.extend(x[:MAX_LINE] for x in last)
                line_no += n
            else:
                for x in block.removesuffix(b"\n").split(b"\n"):
                    line_no += 1
                    tail.append(x[:MAX_LINE])
                    if _ELASTIC_FAILED.search(x) or _REPORT_END.match(x):
                        spans.append((line_no, tail))
                        tail, gave_up, count = _Tail(keep), False, count + 1
                    elif _ELASTIC_GAVE_UP.search(x):
                        gave_up = True
            if not chunk:
                break
    if any(not _REPORT_REST.match(x) for x in tail) and not gave_up:
        spans.append((line_no, tail))  # the launcher went on: a last attempt still running, or one that finished
        count += 1
    if count < 2:
        return None
    first_n = count - len(spans)
    return [(first_n + i, last - len(kept.lines) + 1, b"\n".join(kept.lines).decode("utf-8", errors="replace"))
            for i, (last, kept) in enumerate(spans)]


class _Tail:
    """The last `keep` lines of one attempt, and at most ATTEMPT_BYTES of them: 16 attempts of 100,000 lines
    of 64 KiB each kept up to the whole 1 GiB the split reads (a real log of 16 torchrun restarts: 1 GB resident)."""

    def __init__(self, keep: int) -> None:
        from collections import deque

        self.lines: deque[bytes] = deque(maxlen=keep)
        self.size = 0

    def append(self, line: bytes) -> None:
        if len(self.lines) == self.lines.maxlen:
            self.size -= len(self.lines[0])
        self.lines.append(line)
        self.size += len(line)
        while self.size > ATTEMPT_BYTES and len(self.lines) > 1:
            self.size -= len(self.lines.popleft())

    def extend(self, lines: Iterable[bytes]) -> None:
        for x in lines:
            self.append(x)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.lines)
