"""A log cut inside a traceback: its last lines are a traceback's header or frames with no exception line after them (a
paste or a copy that lost its end). The exception that ended the run was printed; the reader has only where it was
raised. A traceback Python's threading printed for a thread that died is that thread's end, not the process's.
"""

from __future__ import annotations

from ml_skills.lazyre import lazy
from ml_skills.models import LogEvidence

_FRAME = lazy(r'^\s*File "[^"]+", line \d+')
# Python 3.11+ underlines the failing expression with a line of carets: not a line of its own
CARETS = lazy(r"^\s*[\^~]+\s*$")
_TB_HEADER = lazy(r"Traceback \(most recent calls?\b")
# IPython's and Jupyter's frames: a location line ('/x/training.py in fit(self, x)', Colab's '[/x/y.py](https://...) in
# f(a)', IPython 8's 'File ~/x/y.py:990, in f(a)'), then numbered source lines, the failing one marked '---> 990 ...'
_IPY_FRAME = lazy(r"^\s*(?:\[[^\]\n]{1,400}\]\([^)\n]{0,400}\)|\S{1,400}\.py|File \S{1,400}:\d+,) in [\w<>.]+\(")
_IPY_SOURCE = lazy(r"^\s*(?:-*>\s*)?\d+\s")


def ends_in_traceback(log: LogEvidence) -> bool:
    """The log's last lines are traceback frames with no exception line after them: it was cut mid-traceback."""
    lines = [x for x in (log.tail.lines if log.tail else []) if x.strip() and not CARETS.match(x)]
    tail, recent = lines[-6:], (log.tail.lines if log.tail else [])[-400:]
    # a paste may start inside the traceback (no header): several frames in a row say the same
    framed = any("Traceback (most recent call last)" in x for x in recent) or \
        sum(1 for x in recent if x.lstrip().startswith('File "')) >= 3
    if _in_a_threads_traceback(recent):
        return False  # a thread's exception ('Exception in thread Thread-1:') ends that thread, never the process
    if tail and _TB_HEADER.search(tail[-1]):
        return True  # cut right after the header (Sacred's 'Traceback (most recent calls WITHOUT Sacred internals):')
    if tail and framed and _ipython_frame_last(lines[-12:]):
        return True
    return bool(tail) and framed and (_FRAME.match(tail[-1]) is not None or (len(tail) > 1 and _FRAME.match(tail[-2]) is not None))


def _ipython_frame_last(tail: list[str]) -> bool:
    """The last lines are an IPython frame: its location line, then only its numbered source lines."""
    at = next((i for i in range(len(tail) - 1, -1, -1) if _IPY_FRAME.match(tail[i])), None)
    return at is not None and all(_IPY_SOURCE.match(x) for x in tail[at + 1 :])


_THREAD_HEADER = lazy(r"^Exception in thread [^\n]{1,200}:\s*$")
# what a traceback and its chain print: headers, frames and their source lines (indented), the chain's joining sentences,
# exception lines ('tensorflow.python.framework.errors_impl.CancelledError: ...'), TF's node annotations
_TRACEBACK_LINE = lazy(r"^(\s|Traceback \(most recent call|During handling of the above exception|The above exception was the direct cause|"
                       r"[\w.]+(Error|Exception|Exit|Interrupt|Warning)\b)")


def _in_a_threads_traceback(lines: list[str]) -> bool:
    """The log's end is inside the traceback (and its chain) that Python's threading printed for a thread that died: the
    thread's last words, not the process's (healthy 825 and 829, DeepLabCut's queue-runner thread cancelled at the
    end of training, read as crashed)."""
    at = next((i for i in range(len(lines) - 1, -1, -1) if _THREAD_HEADER.match(lines[i])), None)
    if at is None:
        return False
    after = [x for x in lines[at + 1 :] if x.strip()]
    return bool(after) and all(_TRACEBACK_LINE.match(x) for x in after)
