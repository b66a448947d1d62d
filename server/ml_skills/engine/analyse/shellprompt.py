"""A shell prompt after a run's output: the process exited and the terminal took input again.

A pasted terminal session often ends in the prompt that came back when the script returned ('(env) [user@host dir]$',
'user@host:~/work$', 'C:\\work>'). With no failure printed before it, the script returned on its own: a run that
stopped early (an early-stopping callback, a planned end the log does not announce) is over, not still going.
"""

from __future__ import annotations

from ml_skills.lazyre import lazy
from ml_skills.models import LogEvidence

_PROMPT = lazy(
    r"^(?:\([\w.-]{1,64}\)\s*)?"  # a conda or venv name
    r"(?:\[[\w.-]{1,64}@[\w.-]{1,64}\s[^\]\n]{0,200}\]\s?[$#]"  # [user@host dir]$
    r"|[\w.-]{1,64}@[\w.-]{1,64}:[^\s$#]{0,200}\s?[$#]"  # user@host:~/dir$
    r"|(?:PS\s)?[A-Z]:\\[^>\n]{0,200}>)"  # C:\dir> and PowerShell's PS C:\dir>
    r"(?:\s.*)?$"
)


def back_at_prompt(log: LogEvidence) -> int | None:
    """The line of the shell prompt that ends the log, after training progress, or None."""
    if log.tail is None or not log.tail.lines or log.trajectory.last_progress is None:
        return None
    for i in range(len(log.tail.lines) - 1, -1, -1):
        text = log.tail.lines[i].strip()
        if text:
            line_no = log.tail.start_line + i
            if _PROMPT.match(text) and line_no > log.trajectory.last_progress.line_no:
                return line_no
            return None
    return None
